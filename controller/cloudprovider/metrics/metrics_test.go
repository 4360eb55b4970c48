package metrics

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
)

// A failed call counts under the nodepool of the claim it was about and the
// error's kind, as Karpenter v1.15 labels karpenter_cloudprovider_errors_total:
// an error of no known kind is "unknown".
func TestErrorsNameTheirNodePoolAndKind(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC))
	cp := fake.New(clk)
	decorated := Decorate(cp, clk, "test.errors")
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{v1.LabelNodePool: "team-a"}}}
	for _, c := range []struct {
		err  error
		kind string
	}{
		{errors.New("boom"), "unknown"},
		{cloudprovider.NewInsufficientCapacityError(errors.New("no capacity")), "InsufficientCapacityError"},
	} {
		counter := errorsTotal.WithLabelValues("test.errors", "Create", cp.Name(), c.kind, "team-a")
		before := testutil.ToFloat64(counter)
		cp.SetCreateErr(c.err)
		if _, err := decorated.Create(context.Background(), nc); err == nil {
			t.Fatalf("Create succeeded; the fake was set to fail with %v", c.err)
		}
		if got := testutil.ToFloat64(counter) - before; got != 1 {
			t.Errorf("errors_total{error=%q, nodepool=team-a} rose by %v, want 1", c.kind, got)
		}
	}
}
