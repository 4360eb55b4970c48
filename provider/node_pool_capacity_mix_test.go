package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/capacitymix"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestAccNodePoolCapacityMix: capacity_mix is written as the annotations the
// controller reads; a change of it plans no drift and shows the mix before and
// after with the pool's nodes (2 on-demand) in the plan's warning and in
// planned_impact; a value dropped from it goes from the cluster; an annotation
// another manager adds (kubectl annotate), or one that does not parse, is drift
// the apply takes off; import reads it back; removing capacity_mix removes both
// annotations, kubectl's too; and set again over kubectl's share, the impact
// says the share goes, as the apply makes it.
func TestAccNodePoolCapacityMix(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	config := func(mix string) string {
		return kubeProvider(api.Kubeconfig) + `
resource "dovetail_node_pool" "mixed" {
  name = "mixed"
  ` + mix + `
  spec = {
    limits     = { nodes = "10" }
    disruption = { consolidate_after = "Never" }
    template = {
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
        requirements   = [
          { key = "node.kubernetes.io/instance-type", operator = "In", values = ["m5.large"] },
          { key = "karpenter.sh/capacity-type", operator = "In", values = ["spot", "on-demand"] },
        ]
      }
    }
  }
}
`
	}
	annotationsAre := func(want map[string]string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			np := &v1.NodePool{}
			if err := api.Client.Get(ctx, client.ObjectKey{Name: "mixed"}, np); err != nil {
				return err
			}
			for _, key := range []string{capacitymix.OnDemandBaseAnnotationKey, capacitymix.SpotPercentAnnotationKey} {
				if got, ok := np.Annotations[key]; got != want[key] || ok != (want[key] != "") {
					return fmt.Errorf("annotations %v; want %s=%q", np.Annotations, key, want[key])
				}
			}
			return nil
		}
	}
	// annotate is kubectl annotate of the pool's spot share.
	annotate := func(value string) {
		np := &v1.NodePool{}
		must(t, api.Client.Get(ctx, client.ObjectKey{Name: "mixed"}, np))
		patch := client.MergeFrom(np.DeepCopy())
		if np.Annotations == nil {
			np.Annotations = map[string]string{}
		}
		np.Annotations[capacitymix.SpotPercentAnnotationKey] = value
		must(t, api.Client.Patch(ctx, np, patch, client.FieldOwner("kubectl-annotate")))
	}
	claimsGoWithPool(t, api.Client, "mixed")
	var warnings planWarnings
	const addr = "dovetail_node_pool.mixed"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []resource.TestStep{
			{
				Config: config(`capacity_mix = { on_demand_base = 1, spot_percent = 50 }`),
				Check: resource.ComposeTestCheckFunc(
					annotationsAre(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "1", capacitymix.SpotPercentAnnotationKey: "50"}),
					func(*terraform.State) error { return launchNodes(ctx, api.Client, "mixed", "mixed-a", "mixed-b") }),
			},
			{
				PreConfig:        warnings.reset,
				Config:           config(`capacity_mix = { on_demand_base = 3 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectUnknownValue(addr, tfjsonpath.New("planned_impact"))}},
				Check: resource.ComposeTestCheckFunc(
					annotationsAre(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "3"}),
					resource.TestMatchResourceAttr(addr, "planned_impact", regexp.MustCompile(
						`(?s)No node of the 2 it governs drifts.*\nCapacity mix: on-demand base 3, at most 100% spot beyond it \(was: on-demand base 1, at most 50% spot beyond it\); nodes 2 on-demand, 0 spot before, 2 on-demand, 0 spot after\.`)),
					warnings.saw(`(?s)^Planned impact of changing NodePool mixed: .*Capacity mix: on-demand base 3`)),
			},
			{
				// kubectl annotate: the mix is drift, and the apply takes it off.
				PreConfig:        func() { annotate("10") },
				Config:           config(`capacity_mix = { on_demand_base = 3 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}},
				Check:            annotationsAre(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "3"}),
			},
			{
				// A value the controller cannot read (it would ignore the whole mix)
				// is drift too.
				PreConfig:        func() { annotate("most") },
				Config:           config(`capacity_mix = { on_demand_base = 3 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}},
				Check:            annotationsAre(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "3"}),
			},
			{
				Config:           config(`capacity_mix = { on_demand_base = 3 }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
			{
				ResourceName:            addr,
				ImportState:             true,
				ImportStateVerify:       true,
				ImportStateId:           "mixed",
				ImportStateVerifyIgnore: []string{"status", "planned_impact"},
			},
			{
				// Removing capacity_mix removes both annotations, the one kubectl
				// added beside it too.
				PreConfig: func() { annotate("10") },
				Config:    config(""),
				Check:     annotationsAre(nil),
			},
			{
				// Set again over what kubectl left: the plan's impact says the
				// share it does not set goes, and the apply takes it off.
				PreConfig: func() {
					annotate("10")
					warnings.reset()
				},
				Config: config(`capacity_mix = { on_demand_base = 3 }`),
				Check: resource.ComposeTestCheckFunc(
					annotationsAre(map[string]string{capacitymix.OnDemandBaseAnnotationKey: "3"}),
					warnings.saw(`Capacity mix: on-demand base 3, at most 100% spot beyond it \(was: on-demand base 0, at most 10% spot beyond it\)`)),
			},
		},
	})
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
