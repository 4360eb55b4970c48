package aws_test

import (
	"fmt"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// policyTags are the request tags the shipped IAM policy requires on every fleet,
// instance, volume, network interface and spot request a launch creates
// (provider/controller_policy.go, AllowScopedEC2InstanceActionsWithTags), plus the
// class tag Karpenter puts beside them.
func policyTags(cluster, pool string) map[string]string {
	return map[string]string{
		dtaws.ClusterTag(cluster): "owned",
		dtaws.TagEKSCluster:       cluster,
		dtaws.TagNodePool:         pool,
		dtaws.TagNodeClass:        "default",
	}
}

func checkTags(t *testing.T, what string, got []ec2types.Tag, want map[string]string) {
	t.Helper()
	have := tagMap(got)
	for k, v := range want {
		if have[k] != v {
			t.Errorf("%s: tag %s = %q, want %q (all: %v)", what, k, have[k], v, have)
		}
	}
}

func templateTagSpecs(in *ec2.CreateLaunchTemplateInput) map[ec2types.ResourceType][]ec2types.Tag {
	out := map[ec2types.ResourceType][]ec2types.Tag{}
	for _, ts := range in.LaunchTemplateData.TagSpecifications {
		out[ts.ResourceType] = ts.Tags
	}
	return out
}

func TestLaunchTagsWhatThePolicyRequires(t *testing.T) {
	f := newUnitFixture(t)
	onDemand := claim("od", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))
	if _, err := f.cp.Create(f.ctx, onDemand); err != nil {
		t.Fatal(err)
	}
	if len(f.ec2.fleets) != 1 {
		t.Fatalf("%d CreateFleet calls, want 1", len(f.ec2.fleets))
	}
	fleet := f.ec2.fleets[0]
	specs := map[ec2types.ResourceType][]ec2types.Tag{}
	for _, ts := range fleet.TagSpecifications {
		specs[ts.ResourceType] = ts.Tags
	}
	claimTags := policyTags(fakeCluster, "general")
	claimTags[dtaws.TagNodeClaim] = "od"
	claimTags[dtaws.TagName] = "od"
	claimTags["team"] = "billing"
	for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeFleet, ec2types.ResourceTypeInstance, ec2types.ResourceTypeVolume} {
		if _, ok := specs[rt]; !ok {
			t.Errorf("CreateFleet has no TagSpecification for %s; the policy refuses the launch without its request tags", rt)
			continue
		}
		checkTags(t, "CreateFleet "+string(rt), specs[rt], claimTags)
	}

	if len(f.ec2.createdTemplates) != 1 {
		t.Fatalf("%d launch templates created, want 1", len(f.ec2.createdTemplates))
	}
	lt := templateTagSpecs(f.ec2.createdTemplates[0])
	if _, ok := lt[ec2types.ResourceTypeNetworkInterface]; !ok {
		t.Errorf("the launch template does not tag the network interface; the policy refuses the launch without its request tags")
	}
	checkTags(t, "launch template network-interface", lt[ec2types.ResourceTypeNetworkInterface], policyTags(fakeCluster, "general"))
	if _, ok := lt[ec2types.ResourceTypeSpotInstancesRequest]; ok {
		t.Errorf("an on-demand template tags a spot request; EC2 refuses that on on-demand launches")
	}

	spot := claim("spot", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeSpot))
	if _, err := f.cp.Create(f.ctx, spot); err != nil {
		t.Fatal(err)
	}
	if len(f.ec2.createdTemplates) != 2 {
		t.Fatalf("%d launch templates after a spot launch, want a spot one beside the on-demand one", len(f.ec2.createdTemplates))
	}
	lt = templateTagSpecs(f.ec2.createdTemplates[1])
	for _, rt := range []ec2types.ResourceType{ec2types.ResourceTypeNetworkInterface, ec2types.ResourceTypeSpotInstancesRequest} {
		if _, ok := lt[rt]; !ok {
			t.Errorf("the spot launch template does not tag %s", rt)
		}
		checkTags(t, "spot launch template "+string(rt), lt[rt], policyTags(fakeCluster, "general"))
	}
}

// Two pools sharing a class and asking for the same shape must not share a launch
// template: the template tags the network interface with one pool.
func TestLaunchTemplatesAreKeyedByPool(t *testing.T) {
	f := newUnitFixture(t)
	reqs := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)}
	for i, pool := range []string{"general", "batch", "general"} {
		nc := claim(fmt.Sprintf("%s-%d", pool, i), "default", reqs...)
		nc.Labels[v1.LabelNodePool] = pool
		if _, err := f.cp.Create(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.ec2.createdTemplates); n != 2 {
		t.Errorf("%d launch templates for two pools, want one each (the second launch of a pool reuses its own)", n)
	}
	for i, fleet := range f.ec2.fleets {
		var pool string
		for _, ts := range fleet.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeInstance {
				pool = tagMap(ts.Tags)[dtaws.TagNodePool]
			}
		}
		for _, cfg := range fleet.LaunchTemplateConfigs {
			name := aws.ToString(cfg.LaunchTemplateSpecification.LaunchTemplateName)
			lt, ok := f.ec2.templates[name]
			if !ok {
				t.Fatalf("fleet %d uses unknown template %s", i, name)
			}
			if got := tagMap(templateTagSpecs(lt)[ec2types.ResourceTypeNetworkInterface])[dtaws.TagNodePool]; got != pool {
				t.Errorf("fleet %d for pool %s launches from a template tagging its network interface with pool %q", i, pool, got)
			}
		}
	}
}

// The class's context field reaches CreateFleet.
func TestLaunchPassesTheClassContext(t *testing.T) {
	f := newUnitFixture(t)
	patch := client.MergeFrom(f.class.DeepCopy())
	f.class.Spec.Context = aws.String("ctx-reserved-1")
	if err := f.kube.Patch(f.ctx, f.class, patch); err != nil {
		t.Fatal(err)
	}
	if _, err := f.cp.Create(f.ctx, claim("od", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err != nil {
		t.Fatal(err)
	}
	if len(f.ec2.fleets) != 1 || aws.ToString(f.ec2.fleets[0].Context) != "ctx-reserved-1" {
		t.Fatalf("CreateFleet context %v, want the class's", f.ec2.fleets)
	}
}
