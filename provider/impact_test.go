package provider_test

import (
	"context"
	"regexp"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	"github.com/hashicorp/terraform-plugin-testing/tfjsonpath"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// TestPlanImpactShowsDriftInTerraformPlan: a dovetail_node_pool with two running
// nodes, a pod on each. Changing only the template's labels plans both nodes
// updated in place; then changing expireAfter plans planned_impact "2 drift ...
// NodePoolDrift", paced by the pool's budget (1 node at a time: 2 waves), their
// pods on two new m5.large at the same $/h; an unchanged spec plans nothing.
// The plans' warnings say the same; and once the controller's Deployment runs with
// DRIFT_ON_METADATA=true, a change of labels alone plans both nodes drifted and
// replaced, as that controller would replace them.
func TestPlanImpactShowsDriftInTerraformPlan(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	config := func(metadata, spec string) string {
		return kubeProvider(api.Kubeconfig) + `
resource "dovetail_node_pool" "general" {
  name = "general"
  spec = {
    disruption = { consolidate_after = "Never", budgets = [{ nodes = "1" }] }
    template = {
      ` + metadata + `
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
        requirements   = [{ key = "node.kubernetes.io/instance-type", operator = "In", values = ["m5.large"] }]
        ` + spec + `
      }
    }
  }
}
`
	}
	launch := func(*terraform.State) error { return launchNodes(ctx, api.Client, "general", "general-a", "general-b") }
	claimsGoWithPool(t, api.Client, "general")
	// The plan shows the impact as a warning and leaves planned_impact to the
	// apply, which records it as worked out just before applying.
	unknown := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{
		plancheck.ExpectUnknownValue("dovetail_node_pool.general", tfjsonpath.New("planned_impact"))}}
	impact := func(re string) resource.TestCheckFunc {
		return resource.TestMatchResourceAttr("dovetail_node_pool.general", "planned_impact", regexp.MustCompile(re))
	}
	drift := `expire_after = "360h"`
	labels := `metadata = { labels = { team = "web" } }`
	otherLabels := `metadata = { labels = { team = "api" } }`
	var warnings planWarnings
	// The controller's Deployment as the chart renders it, set to replace nodes
	// whose template metadata changed.
	driftOnMetadata := func() {
		warnings.reset()
		labels := map[string]string{"app.kubernetes.io/name": "dovetail"}
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "dovetail", Namespace: "default", Labels: labels},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels}, Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "controller", Image: "ghcr.io/dovetail-sh/dovetail-controller:v0.1.0",
					Env: []corev1.EnvVar{{Name: "DRIFT_ON_METADATA", Value: "true"}}}}}}}}
		if err := api.Client.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: warnings.factories(),
		Steps: []resource.TestStep{
			{Config: config("", ""), Check: launch},
			{
				PreConfig:        warnings.reset,
				Config:           config(labels, ""),
				ConfigPlanChecks: unknown,
				Check: resource.ComposeTestCheckFunc(
					impact(`(?s)Of 2 node\(s\): 0 drift and are replaced, 2 are updated in place.*Cost: \$0\.1920/h before, \$0\.1920/h after \(\+0\.0000\)`),
					warnings.saw(`(?s)^Planned impact of changing NodePool general: Of 2 node\(s\): 0 drift and are replaced, 2 are updated in place`)),
			},
			{
				PreConfig:        driftOnMetadata,
				Config:           config(otherLabels, ""),
				ConfigPlanChecks: unknown,
				Check: resource.ComposeTestCheckFunc(
					impact(`(?s)Of 2 node\(s\): 2 drift and are replaced, 0 are updated in place.*Drift: 2 NodePoolDrift\.`),
					warnings.saw(`(?s)^Planned impact of changing NodePool general: Of 2 node\(s\): 2 drift and are replaced.*Drift: 2 NodePoolDrift\..*Settings:\n- settings from the controller's Deployment default/dovetail \(feature gates [^)]*, drift-on-metadata true\)`)),
			},
			{
				PreConfig:        warnings.reset,
				Config:           config(otherLabels, drift),
				ConfigPlanChecks: unknown,
				Check: resource.ComposeTestCheckFunc(
					impact(`(?s)Of 2 node\(s\): 2 drift and are replaced.*Drift: 2 NodePoolDrift\..*Pacing: 2 wave\(s\) of up to 1 node\(s\).*\nReplacements: 2 m5\.large \(on-demand, us-west-2a\)\.\nCost: \$0\.1920/h before, \$0\.1920/h after`),
					warnings.saw(`(?s)Pacing: 2 wave\(s\) of up to 1 node\(s\)`)),
			},
			{
				Config:           config(otherLabels, drift),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectEmptyPlan()}},
			},
		},
	})
}

// launchNodes makes the pool Ready and adds what a controller would have
// launched from it as applied: a NodeClaim (on-demand m5.large, stamped with the
// pool's hash), its Node and a running pod of 1 cpu on it, for each name.
func launchNodes(ctx context.Context, c client.Client, pool string, names ...string) error {
	np := &v1.NodePool{}
	if err := c.Get(ctx, client.ObjectKey{Name: pool}, np); err != nil {
		return err
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	if err := c.Status().Update(ctx, np); err != nil {
		return err
	}
	for _, name := range names {
		labels := map[string]string{v1.LabelNodePool: pool, v1.LabelInstanceType: "m5.large", v1.LabelTopologyZone: "us-west-2a",
			v1.LabelCapacityType: v1.CapacityTypeOnDemand, v1.LabelHostname: name, v1.LabelArch: "amd64", v1.LabelOS: "linux"}
		capacity := corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("2"), corev1.ResourceMemory: k8sresource.MustParse("8Gi"), corev1.ResourcePods: k8sresource.MustParse("29")}
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: map[string]string{
			v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion}},
			Spec: v1.NodeClaimSpec{NodeClassRef: np.Spec.Template.Spec.NodeClassRef, ExpireAfter: np.Spec.Template.Spec.ExpireAfter,
				Requirements: []v1.NodeSelectorRequirementWithMinValues{{Key: v1.LabelInstanceType, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"m5.large"}}}}}}
		if err := c.Create(ctx, nc); err != nil {
			return err
		}
		nc.Status = v1.NodeClaimStatus{ProviderID: "aws:///us-west-2a/i-" + name, NodeName: name, Capacity: capacity, Allocatable: capacity,
			Conditions: []metav1.Condition{{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", LastTransitionTime: metav1.Now()}}}
		if err := c.Status().Update(ctx, nc); err != nil {
			return err
		}
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Spec: corev1.NodeSpec{ProviderID: nc.Status.ProviderID}}
		if err := c.Create(ctx, node); err != nil {
			return err
		}
		node.Status = corev1.NodeStatus{Capacity: capacity, Allocatable: capacity, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
		if err := c.Status().Update(ctx, node); err != nil {
			return err
		}
		controller := true
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-" + name, Namespace: "default",
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "web", Controller: &controller}}},
			Spec: corev1.PodSpec{NodeName: name, Containers: []corev1.Container{{Name: "web", Image: "web", Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: k8sresource.MustParse("1"), corev1.ResourceMemory: k8sresource.MustParse("1Gi")}}}}}}
		if err := c.Create(ctx, pod); err != nil {
			return err
		}
		pod.Status.Phase = corev1.PodRunning
		if err := c.Status().Update(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// claimsGoWithPool stands in for the controller, which no test here runs: when
// the pool is being deleted, its claims go as termination would take them. Only
// a pool seen before counts as gone: the client's rate limiter may hold a delete
// decided before the pool was first created until after the test's claims are,
// which took a claim from under a plan (1 node of 2 governed).
func claimsGoWithPool(t *testing.T, c client.Client, pool string) {
	ctx := context.Background()
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	go func() {
		seen := false
		for {
			select {
			case <-stop:
				return
			case <-time.After(200 * time.Millisecond):
			}
			np := &v1.NodePool{}
			err := c.Get(ctx, client.ObjectKey{Name: pool}, np)
			seen = seen || err == nil
			if seen && (apierrors.IsNotFound(err) || (err == nil && np.DeletionTimestamp != nil)) {
				_ = c.DeleteAllOf(ctx, &v1.NodeClaim{}, client.MatchingLabels{v1.LabelNodePool: pool})
			}
		}
	}()
}
