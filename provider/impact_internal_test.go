package provider

import (
	"context"
	"errors"
	"regexp"
	"testing"

	"k8s.io/client-go/rest"
)

// TestPlanImpactWithoutTheClusterIsANote: when the cluster cannot be reached
// the impact says so instead of failing the plan.
func TestPlanImpactWithoutTheClusterIsANote(t *testing.T) {
	r := NewNodePoolResource().(*customResource)
	r.clients = &Clients{Kubernetes: &KubeClients{build: func() (*rest.Config, error) {
		return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}}}
	_, err := r.workOutImpact(context.Background(), "general", customResourceModel{})
	if err == nil || !regexp.MustCompile(`the cluster could not be reached \(dial tcp`).MatchString(err.Error()) {
		t.Errorf("got %v; want the unreachable cluster named", err)
	}
}
