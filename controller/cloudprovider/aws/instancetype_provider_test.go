package aws_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	clocktesting "k8s.io/utils/clock/testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// countingEC2 counts the calls that reach the emulator.
type countingEC2 struct {
	aws.EC2API
	calls atomic.Int32
	// failing makes DescribeInstanceTypes fail as a throttled EC2 does.
	failing atomic.Bool
}

func (c *countingEC2) DescribeInstanceTypes(ctx context.Context, in *ec2.DescribeInstanceTypesInput, opts ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	c.calls.Add(1)
	if c.failing.Load() {
		return nil, throttled
	}
	return c.EC2API.DescribeInstanceTypes(ctx, in, opts...)
}

func find(t *testing.T, f *catalog.File, name string) catalog.Entry {
	t.Helper()
	e, ok := f.Find(name)
	if !ok {
		t.Fatalf("%s was not discovered", name)
	}
	return e
}

func TestInstanceTypesFromEC2(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	moto := testenv.StartMoto(t)
	clients := testenv.AWSClients(t, moto, "us-west-2")
	api := &countingEC2{EC2API: clients.EC2}
	clk := clocktesting.NewFakeClock(time.Now())
	provider := aws.NewInstanceTypeProvider(api, "us-west-2", aws.Settings{}, clk)
	ctx := context.Background()
	types, err := provider.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(types.InstanceTypes) < 480 {
		t.Errorf("discovered %d priced instance types, want the region's full list (480+)", len(types.InstanceTypes))
	}

	m5 := find(t, types, "m5.large")
	for key, want := range map[string]string{
		v1.LabelInstanceFamily: "m5", v1.LabelInstanceCategory: "m", v1.LabelInstanceGen: "5", v1.LabelInstanceSize: "large",
		v1.LabelInstanceCPU: "2", v1.LabelInstanceMemory: "8192", v1.LabelInstanceHypervisor: "nitro", v1.LabelInstanceCPUMfr: "intel",
	} {
		if got := m5.Labels[key]; got != want {
			t.Errorf("m5.large %s = %q, want %q", key, got, want)
		}
	}
	if m5.Architecture != v1.ArchitectureAmd64 || m5.CPU != "2" || m5.Memory != "8192Mi" {
		t.Errorf("m5.large = %s %s cpu %s memory", m5.Architecture, m5.CPU, m5.Memory)
	}
	// 3 ENIs × (10 addresses − 1) + 2.
	if m5.Pods != 29 {
		t.Errorf("m5.large max pods = %d, want 29 from its ENI limits", m5.Pods)
	}
	zones := map[string]bool{}
	for _, o := range m5.Offerings {
		zones[o.Zone] = true
		if o.CapacityType == v1.CapacityTypeOnDemand && o.Price != 0.096 {
			t.Errorf("m5.large on-demand in %s costs %v, want 0.096 (us-east-1's price as the fallback)", o.Zone, o.Price)
		}
	}
	if !zones["us-west-2a"] || !zones["us-west-2b"] {
		t.Errorf("m5.large offered in %v, want us-west-2 zones from DescribeInstanceTypeOfferings", zones)
	}

	if g5 := find(t, types, "g5.xlarge"); g5.Resources[aws.ResourceNVIDIAGPU] != "1" || g5.Labels[v1.LabelInstanceGPUName] != "a10g" || g5.Labels[v1.LabelInstanceGPUMfr] != "nvidia" {
		t.Errorf("g5.xlarge GPU = %v %v", g5.Resources, g5.Labels)
	}
	if arm := find(t, types, "m6g.large"); arm.Architecture != v1.ArchitectureArm64 || arm.Labels[v1.LabelInstanceCPUMfr] != "aws" {
		t.Errorf("m6g.large = %s, %s", arm.Architecture, arm.Labels[v1.LabelInstanceCPUMfr])
	}

	calls := api.calls.Load()
	if _, err := provider.List(ctx); err != nil {
		t.Fatal(err)
	}
	if api.calls.Load() != calls {
		t.Errorf("a second List within the TTL called EC2 again")
	}
	clk.Step(aws.InstanceTypeTTL + time.Second)
	if _, err := provider.List(ctx); err != nil {
		t.Fatal(err)
	}
	if api.calls.Load() == calls {
		t.Errorf("List after the TTL did not refresh from EC2")
	}

	// A failed refresh keeps serving what EC2 said last.
	clk.Step(aws.InstanceTypeTTL + time.Second)
	api.failing.Store(true)
	stale, err := provider.List(ctx)
	if err != nil || len(stale.InstanceTypes) != len(types.InstanceTypes) {
		t.Errorf("List while EC2 fails: %v; want the last good list", err)
	}
	api.failing.Store(false)

	reserved := aws.NewInstanceTypeProvider(clients.EC2, "us-west-2", aws.Settings{ReservedENIs: 1}, clk)
	types, err = reserved.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := find(t, types, "m5.large").Pods; got != 20 {
		t.Errorf("with one reserved ENI m5.large max pods = %d, want 20", got)
	}

	// Predictions shape the embedded catalog by the same rule: every type the
	// region has holds as many pods there as the controller's list says, with and
	// without a reserved ENI. A type of two network cards counts only the default
	// card's interfaces, as the VPC CNI uses (and Karpenter counts) no other.
	embedded, err := catalog.EmbeddedAWS()
	if err != nil {
		t.Fatal(err)
	}
	for reserved, listed := range map[int]*catalog.File{0: stale, 1: types} {
		compared := 0
		for _, e := range embedded.WithReservedENIs(reserved).InstanceTypes {
			if got, ok := listed.Find(e.Name); ok {
				compared++
				if got.Pods != e.Pods {
					t.Errorf("reserved ENIs %d: %s holds %d pods in the controller's list, %d in predictions'", reserved, e.Name, got.Pods, e.Pods)
				}
			}
		}
		if compared < 400 {
			t.Errorf("reserved ENIs %d: only %d types compared", reserved, compared)
		}
	}
	if got := find(t, stale, "c6in.32xlarge").Pods; got != 8*49+2 {
		t.Errorf("c6in.32xlarge (2 cards of 8 interfaces) holds %d pods; want the default card's 394", got)
	}
}
