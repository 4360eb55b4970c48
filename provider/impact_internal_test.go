package provider

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestPlanImpactWithoutTheClusterIsANote: when the cluster cannot be reached
// the impact says so instead of failing the plan.
func TestPlanImpactWithoutTheClusterIsANote(t *testing.T) {
	r := NewNodePoolResource().(*customResource)
	r.clients = &Clients{Kubernetes: &KubeClients{build: func() (*rest.Config, error) {
		return nil, errors.New("dial tcp 127.0.0.1:1: connect: connection refused")
	}}}
	_, err := r.workOutImpact(context.Background(), "general", customResourceModel{}, customResourceModel{})
	if err == nil || !regexp.MustCompile(`the cluster could not be reached \(dial tcp`).MatchString(err.Error()) {
		t.Errorf("got %v; want the unreachable cluster named", err)
	}
}

// The impact prices spot offerings as the controller does, at the latest spot
// price EC2 gives (here the emulator's, below on-demand), and says so; without an
// aws block, or when EC2 refuses, spot stays at the on-demand price and the note
// says why.
func TestImpactPricesSpotAsTheController(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	cat = cat.InZones([]string{"us-west-2a"})
	price := func(f *catalog.File, capacityType string) float64 {
		e, ok := f.Find("m5.large")
		if !ok {
			t.Fatal("no m5.large in the catalog")
		}
		for _, o := range e.Offerings {
			if o.CapacityType == capacityType {
				return o.Price
			}
		}
		t.Fatalf("m5.large has no %s offering", capacityType)
		return 0
	}
	onDemand := price(cat, v1.CapacityTypeOnDemand)
	if price(cat, v1.CapacityTypeSpot) != onDemand {
		t.Fatalf("the embedded catalog's spot m5.large is not at on-demand; the test assumes it")
	}

	r := NewNodePoolResource().(*customResource)
	r.clients = &Clients{}
	same, note := r.spotPriced(context.Background(), cat)
	if price(same, v1.CapacityTypeSpot) != onDemand || !strings.Contains(note, "no aws block") {
		t.Errorf("without an aws block: spot at %v, note %q; want on-demand and why", price(same, v1.CapacityTypeSpot), note)
	}

	moto := testenv.StartMoto(t)
	r.clients = &Clients{AWS: &AWSClients{EC2: testenv.AWSClients(t, moto, "us-west-2").EC2, Region: "us-west-2"}}
	priced, note := r.spotPriced(context.Background(), cat)
	if spot := price(priced, v1.CapacityTypeSpot); spot >= onDemand || spot <= 0 || price(priced, v1.CapacityTypeOnDemand) != onDemand {
		t.Errorf("spot m5.large at %v (on-demand %v, now %v); want EC2's spot price", spot, onDemand, price(priced, v1.CapacityTypeOnDemand))
	}
	if !strings.Contains(note, "spot at EC2's latest spot price in us-west-2") {
		t.Errorf("note %q", note)
	}

	moto.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, note := r.spotPriced(ctx, cat); !strings.Contains(note, "the spot price history could not be read") {
		t.Errorf("with EC2 gone: note %q; want the failure named", note)
	}
}
