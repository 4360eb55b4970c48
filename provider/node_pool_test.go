package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func kubeProvider(kubeconfig string) string {
	return fmt.Sprintf(`
provider "dovetail" {
  kubernetes {
    config_path = %q
  }
}
`, kubeconfig)
}

// nodeClassConfig is the "default" EC2NodeClass for cluster "demo"; specExtra goes
// into its spec, extra after it.
func nodeClassConfig(specExtra, extra string) string {
	return `
resource "dovetail_ec2_node_class" "default" {
  name = "default"
  spec = {
    role                          = "KarpenterNodeRole-demo"
    ami_selector_terms            = [{ alias = "al2023@latest" }]
    subnet_selector_terms         = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
    security_group_selector_terms = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
    ` + specExtra + `
  }
  ` + extra + `
}
`
}

// nodePoolConfig is a node class and a pool on it; cpu is the pool's limit.
func nodePoolConfig(kubeconfig, poolName, cpu string) string {
	return kubeProvider(kubeconfig) + nodeClassConfig("metadata_options = { http_put_response_hop_limit = 2 }", "") + fmt.Sprintf(`

resource "dovetail_node_pool" "general" {
  name   = %q
  labels = { team = "platform" }
  spec = {
    template = {
      metadata = { labels = { "billing-team" = "platform" } }
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = dovetail_ec2_node_class.default.name }
        requirements = [
          { key = "karpenter.sh/capacity-type", operator = "In", values = ["spot", "on-demand"] },
          { key = "karpenter.k8s.aws/instance-cpu", operator = "Gt", values = ["3"] },
        ]
      }
    }
    limits     = { cpu = %q }
    disruption = { consolidate_after = "30s", budgets = [{ nodes = "20%%" }, { nodes = "0", schedule = "0 9 * * mon-fri", duration = "8h" }] }
  }
}
`, poolName, cpu)
}

func TestAccNodePoolAndNodeClass(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	kube := api.Client
	pool := func(name string) (*v1.NodePool, error) {
		np := &v1.NodePool{}
		return np, kube.Get(ctx, client.ObjectKey{Name: name}, np)
	}
	limit := func(name, want string) resource.TestCheckFunc {
		return func(*terraform.State) error {
			np, err := pool(name)
			if err != nil {
				return err
			}
			if got := np.Spec.Limits[corev1.ResourceCPU]; got.Cmp(k8sresource.MustParse(want)) != 0 {
				return fmt.Errorf("cpu limit %s, want %s", got.String(), want)
			}
			if len(np.Spec.Template.Spec.Taints) != 0 {
				return fmt.Errorf("taints %v that are not in the configuration", np.Spec.Template.Spec.Taints)
			}
			return nil
		}
	}
	const addr = "dovetail_node_pool.general"
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			for _, obj := range []client.Object{&v1.NodePool{}, &v1.NodePool{}, &awsv1.EC2NodeClass{}} {
				for _, name := range []string{"general", "general-2", "default"} {
					if err := kube.Get(ctx, client.ObjectKey{Name: name}, obj); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%T %s is still in the cluster (%v)", obj, name, err)
					}
				}
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: nodePoolConfig(api.Kubeconfig, "general", "100"),
				Check: resource.ComposeTestCheckFunc(
					limit("general", "100"),
					// The CRD's defaults are in state, as planned: nothing is "known after apply".
					resource.TestCheckResourceAttr(addr, "spec.disruption.consolidation_policy", "WhenEmptyOrUnderutilized"),
					resource.TestCheckResourceAttr(addr, "spec.template.spec.expire_after", "720h"),
					resource.TestCheckResourceAttr("dovetail_ec2_node_class.default", "spec.metadata_options.http_tokens", "required"),
					func(*terraform.State) error {
						np, err := pool("general")
						if err != nil {
							return err
						}
						if np.Labels["team"] != "platform" || np.Spec.Template.Labels["billing-team"] != "platform" || len(np.Spec.Disruption.Budgets) != 2 {
							return fmt.Errorf("the cluster holds %+v", np)
						}
						nc := &awsv1.EC2NodeClass{}
						if err := kube.Get(ctx, client.ObjectKey{Name: "default"}, nc); err != nil {
							return err
						}
						if nc.Spec.Role != "KarpenterNodeRole-demo" || *nc.Spec.MetadataOptions.HTTPPutResponseHopLimit != 2 {
							return fmt.Errorf("the cluster holds %+v", nc.Spec)
						}
						return nil
					}),
			},
			{
				// Update in place.
				Config:           nodePoolConfig(api.Kubeconfig, "general", "200"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}},
				Check:            limit("general", "200"),
			},
			{
				// kubectl edit: a changed limit and an added taint are drift, and the
				// apply removes the taint even though another field manager added it.
				PreConfig: func() {
					np, err := pool("general")
					if err != nil {
						t.Fatal(err)
					}
					np.Spec.Limits[corev1.ResourceCPU] = k8sresource.MustParse("5")
					np.Spec.Template.Spec.Taints = []corev1.Taint{{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}}
					if err := kube.Update(ctx, np, client.FieldOwner("kubectl-edit")); err != nil {
						t.Fatal(err)
					}
				},
				Config:           nodePoolConfig(api.Kubeconfig, "general", "200"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}},
				Check:            limit("general", "200"),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateId:     "general",
				// The status moves on between the two reads (the controller writes it),
				// and what the last update did to the fleet is not in the cluster.
				ImportStateVerifyIgnore: []string{"status", "planned_impact"},
			},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: addr, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "general",
			},
			{
				ResourceName:      "dovetail_ec2_node_class.default",
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateId:     "default",
				// The status moves on between the two reads (the controller writes it),
				// and what the last update did to the fleet is not in the cluster.
				ImportStateVerifyIgnore: []string{"status", "planned_impact"},
			},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: "dovetail_ec2_node_class.default", ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "default",
			},
			{
				// Deleted behind Terraform's back: the plan creates it again.
				PreConfig: func() {
					np, err := pool("general")
					if err != nil {
						t.Fatal(err)
					}
					if err := kube.Delete(ctx, np); err != nil {
						t.Fatal(err)
					}
				},
				Config:           nodePoolConfig(api.Kubeconfig, "general", "200"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionCreate)}},
				Check:            limit("general", "200"),
			},
			{
				// A new name is a new object.
				Config:           nodePoolConfig(api.Kubeconfig, "general-2", "200"),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionDestroyBeforeCreate)}},
				Check: resource.ComposeTestCheckFunc(limit("general-2", "200"), func(*terraform.State) error {
					if _, err := pool("general"); !apierrors.IsNotFound(err) {
						return fmt.Errorf("the old pool is still there (%v)", err)
					}
					return nil
				}),
			},
		},
	})
}

// A plan needs no CRD in the cluster: the schema is the provider's. Applying without
// it says how to install it.
func TestAccNodePoolBeforeCRDs(t *testing.T) {
	acceptance(t)
	api := testenv.StartBareAPIServer(t)
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{Config: nodePoolConfig(api.Kubeconfig, "general", "100"), PlanOnly: true, ExpectNonEmptyPlan: true},
			{Config: nodePoolConfig(api.Kubeconfig, "general", "100"), ExpectError: regexp.MustCompile(`its\s+CRD\s+is\s+not\s+installed`)},
		},
	})
}

// poolWith is a NodePool whose spec has the given disruption and requirement.
func poolWith(name, disruption, requirement string) string {
	return `
provider "dovetail" {
  kubernetes {
    host = "https://127.0.0.1:1"
  }
}
resource "dovetail_node_pool" "p" {
  name = "` + name + `"
  spec = {
    ` + disruption + `
    template = {
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
        requirements   = [` + requirement + `]
      }
    }
  }
}
`
}

// Every rule of the CRDs is checked at plan time, on the attribute that breaks it,
// with the CRD's own message.
func TestNodePoolPlanTimeValidation(t *testing.T) {
	acceptance(t)
	req := `{ key = "kubernetes.io/arch", operator = "In", values = ["arm64"] }`
	cases := map[string]struct{ config, want string }{
		"unknown operator": {poolWith("p", "", `{ key = "kubernetes.io/arch", operator = "Equals", values = ["arm64"] }`),
			`spec.template.spec.requirements\[0\].operator: Unsupported value: "Equals": supported values: "In", "NotIn"`},
		"In without values": {poolWith("p", "", `{ key = "kubernetes.io/arch", operator = "In" }`),
			`requirements with operator 'In' must have a value defined`},
		"restricted label domain": {poolWith("p", "", `{ key = "karpenter.sh/team", operator = "In", values = ["a"] }`),
			`label domain "karpenter.sh" is restricted`},
		"bad duration": {poolWith("p", `disruption = { consolidate_after = "5 minutes" }`, req),
			`spec.disruption.consolidate_after: Invalid value: "5 minutes"`},
		"schedule without duration": {poolWith("p", `disruption = { consolidate_after = "0s", budgets = [{ nodes = "1", schedule = "@daily" }] }`, req),
			`'schedule' must be set with 'duration'`},
		"schedule that is not cron": {poolWith("p", `disruption = { consolidate_after = "0s", budgets = [{ nodes = "1", schedule = "61 * * * *", duration = "1h" }] }`, req),
			`spec.disruption.budgets\[0\].schedule: Invalid value: "61 \* \* \* \*": not a cron expression`},
		"spend limit that is not dollars": {poolWith("p", `limits = { "dovetail.sh/usd-per-hour" = "-5" }`, req),
			`spec.limits\["dovetail.sh/usd-per-hour"\]: Invalid value: "-5": the pool.s\s+spend limit is dollars per hour`},
		"spot percent over 100": {strings.Replace(poolWith("p", "", req), "spec = {", `annotations = { "dovetail.sh/spot-percent" = "120" }
  spec = {`, 1), `annotation dovetail.sh/spot-percent="120": want a percentage from 0 to 100`},
		"on-demand base over the node limit": {strings.Replace(poolWith("p", `limits = { nodes = "2" }`, req), "spec = {", `annotations = { "dovetail.sh/on-demand-base" = "3" }
  spec = {`, 1), `on-demand base of 3 nodes is more than the pool.s limits.nodes \(2\)`},
		"on-demand base of a spot-only pool": {strings.Replace(poolWith("p", "", `{ key = "karpenter.sh/capacity-type", operator = "In", values = ["spot"] }`), "spec = {", `annotations = { "dovetail.sh/on-demand-base" = "1" }
  spec = {`, 1), `an on-demand base needs on-demand capacity`},
		"capacity_mix spot_percent over 100": {strings.Replace(poolWith("p", "", req), "spec = {", `capacity_mix = { spot_percent = 120 }
  spec = {`, 1), `Attribute capacity_mix.spot_percent value must be between 0 and 100, got: 120`},
		"capacity_mix base over the node limit": {strings.Replace(poolWith("p", `limits = { nodes = "2" }`, req), "spec = {", `capacity_mix = { on_demand_base = 3 }
  spec = {`, 1), `(?s)Invalid capacity_mix.on_demand_base.*on-demand base of 3 nodes is more than the pool.s limits.nodes \(2\)`},
		"empty capacity_mix": {strings.Replace(poolWith("p", "", req), "spec = {", `capacity_mix = {}
  spec = {`, 1), `capacity_mix states neither on_demand_base nor spot_percent`},
		"capacity mix set twice": {strings.Replace(poolWith("p", "", req), "spec = {", `capacity_mix = { on_demand_base = 1 }
  annotations  = { "dovetail.sh/on-demand-base" = "2" }
  spec = {`, 1), `annotations\["dovetail.sh/on-demand-base"\] is what capacity_mix.on_demand_base writes`},
		"budget over 100%": {poolWith("p", `disruption = { consolidate_after = "0s", budgets = [{ nodes = "110%" }] }`, req),
			`spec.disruption.budgets\[0\].nodes: Invalid value: "110%"`},
		"misspelt taint effect": {strings.Replace(poolWith("p", "", req), "requirements   =", `taints = [{ key = "dedicated", effect = "NoScheduel" }]
        requirements   =`, 1), `spec.template.spec.taints\[0\].effect: Unsupported value: "NoScheduel": supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"`},
		"weight over 100": {poolWith("p", `weight = 101`, req),
			`spec.weight: Invalid value: 101: spec.weight in body should be less than or equal to 100`},
		"bad name": {poolWith("General_Pool", "", req), `"General_Pool" is not a valid object name`},
		"no kubernetes block": {`
resource "dovetail_node_pool" "p" {
  name = "p"
  spec = { template = { spec = {
    node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = "default" }
    requirements   = []
  } } }
}`, `add kubernetes { config_path = "~/.kube/config" }`},
		"node class with neither role nor instance profile": {`
provider "dovetail" {
  kubernetes {
    host = "https://127.0.0.1:1"
  }
}
resource "dovetail_ec2_node_class" "c" {
  name = "c"
  spec = {
    ami_selector_terms            = [{ alias = "al2023@latest" }]
    subnet_selector_terms         = [{ tags = { "karpenter.sh/discovery" = "" } }]
    security_group_selector_terms = [{ id = "sg-1", name = "web" }]
  }
}`, `must specify exactly one of \['role', 'instanceProfile'\]`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				Steps: []resource.TestStep{{Config: c.config, PlanOnly: true,
					ExpectError: regexp.MustCompile(strings.ReplaceAll(strings.ReplaceAll(c.want, " ", `\s+`), "{", `\{`))}},
			})
		})
	}
}

// A NodePool of the same name made outside this state (kubectl, Helm, another
// state) is not taken over: the create fails, says to import, and the pool keeps
// its spec.
func TestAccNodePoolRefusesToTakeOver(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	theirs := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: v1.NodePoolSpec{
		Limits: v1.Limits{corev1.ResourceCPU: k8sresource.MustParse("7")},
		Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "theirs"},
			Requirements: []v1.NodePoolRequirement{{Key: v1.LabelArch, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{"arm64"}}}},
		}},
	}}
	if err := api.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{{
			Config:      nodePoolConfig(api.Kubeconfig, "shared", "100"),
			ExpectError: regexp.MustCompile(`NodePool shared already exists(.|\n)*terraform import\s+dovetail_node_pool.<name>\s+shared`),
		}},
	})
	got := &v1.NodePool{}
	if err := api.Client.Get(ctx, client.ObjectKey{Name: "shared"}, got); err != nil {
		t.Fatalf("their pool is gone: %v", err)
	}
	if cpu := got.Spec.Limits[corev1.ResourceCPU]; cpu.Cmp(k8sresource.MustParse("7")) != 0 || got.Spec.Template.Spec.NodeClassRef.Name != "theirs" {
		t.Errorf("their pool was rewritten: limits %v, node class %s", got.Spec.Limits, got.Spec.Template.Spec.NodeClassRef.Name)
	}
}

// Destroy waits for the pool's finalizers (its nodes go first) within the timeouts
// block's delete, and when that runs out it fails naming them and how to wait longer.
func TestAccNodePoolDestroyWaitsWithinItsTimeout(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	kube := api.Client
	config := kubeProvider(api.Kubeconfig) + nodeClassConfig("", "") + `
resource "dovetail_node_pool" "general" {
  name = "general"
  spec = {
    template = {
      spec = {
        node_class_ref = { group = "karpenter.k8s.aws", kind = "EC2NodeClass", name = dovetail_ec2_node_class.default.name }
        requirements   = [{ key = "karpenter.sh/capacity-type", operator = "In", values = ["on-demand"] }]
      }
    }
  }
  timeouts {
    delete = "2s"
  }
}
`
	// No controller runs here: the finalizer it would remove stays until the test does.
	setFinalizers := func(finalizers ...string) {
		np := &v1.NodePool{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, np); err != nil {
			t.Fatal(err)
		}
		np.Finalizers = finalizers
		if err := kube.Update(ctx, np); err != nil {
			t.Fatal(err)
		}
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			if err := kube.Get(ctx, client.ObjectKey{Name: "general"}, &v1.NodePool{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the pool is still in the cluster (%v)", err)
			}
			return nil
		},
		Steps: []resource.TestStep{
			{Config: config},
			{
				PreConfig:   func() { setFinalizers(v1.TerminationFinalizer) },
				Config:      config,
				Destroy:     true,
				ExpectError: regexp.MustCompile(`(?s)NodePool general is still terminating.*finalizers\s+\[karpenter.sh/termination\]\s+after\s+2s\s+\(timeouts\s+\{\s+delete\s+=\s+"4s"\s+\}`),
			},
			{
				// Once the finalizer goes, so does the pool: the next apply makes it again.
				PreConfig:        func() { setFinalizers() },
				Config:           config,
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_node_pool.general", plancheck.ResourceActionCreate)}},
			},
		},
	})
}

// TestAccNodeOverlay: dovetail_node_overlay creates a NodeOverlay whose spec is
// typed HCL, refuses at plan what the controller would refuse (a capacity of cpu,
// a requirement on a restricted label), and updates in place.
func TestAccNodeOverlay(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	kubeconfig := api.Kubeconfig
	overlayConfig := func(spec string) string {
		return kubeProvider(kubeconfig) + `
resource "dovetail_node_overlay" "savings" {
  name = "savings"
  spec = {
    ` + spec + `
  }
}
`
	}
	get := func() *v1alpha1.NodeOverlay {
		o := &v1alpha1.NodeOverlay{}
		if err := api.Client.Get(ctx, client.ObjectKey{Name: "savings"}, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      overlayConfig(`capacity = { cpu = "1" }`),
				ExpectError: regexp.MustCompile(`invalid resource restricted|cpu cannot be overlaid`),
			},
			{
				Config:      overlayConfig(`requirements = [{ key = "node.kubernetes.io/instance-type", operator = "Gt", values = ["x"] }]` + "\n" + `price = "1"`),
				ExpectError: regexp.MustCompile(`single positive integer value|instance-type`),
			},
			{
				Config: overlayConfig(`weight = 10
    requirements = [{ key = "karpenter.k8s.aws/instance-family", operator = "In", values = ["m7i"] }]
    price_adjustment = "-30%"`),
				Check: func(*terraform.State) error {
					o := get()
					if o.Spec.PriceAdjustment == nil || *o.Spec.PriceAdjustment != "-30%" || o.Spec.Weight == nil || *o.Spec.Weight != 10 || len(o.Spec.Requirements) != 1 {
						return fmt.Errorf("the overlay's spec is %+v", o.Spec)
					}
					return nil
				},
			},
			{
				Config: overlayConfig(`weight = 10
    requirements = [{ key = "karpenter.k8s.aws/instance-family", operator = "In", values = ["m7i"] }]
    capacity = { "hugepages-2Mi" = "1Gi" }`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_node_overlay.savings", plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					o := get()
					if o.Spec.PriceAdjustment != nil || o.Spec.Capacity.Name("hugepages-2Mi", k8sresource.BinarySI).String() != "1Gi" {
						return fmt.Errorf("the overlay's spec is %+v", o.Spec)
					}
					return nil
				},
			},
		},
	})
}

// TestAccCapacityBuffer: dovetail_capacity_buffer is namespaced: it creates a
// CapacityBuffer in its namespace ("default" unless set), refuses at plan what the
// CRD refuses (a podTemplateRef without replicas or limits), updates in place,
// and imports by namespace/name.
func TestAccCapacityBuffer(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	config := func(spec string) string {
		return kubeProvider(api.Kubeconfig) + `
resource "dovetail_capacity_buffer" "spare" {
  name = "spare"
  spec = {
    ` + spec + `
  }
}
`
	}
	get := func() (*v1beta1.CapacityBuffer, error) {
		cb := &v1beta1.CapacityBuffer{}
		return cb, api.Client.Get(ctx, client.ObjectKey{Namespace: "default", Name: "spare"}, cb)
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      config(`pod_template_ref = { name = "web" }`),
				ExpectError: regexp.MustCompile(`replicas or limits must\s+also\s+be\s+set`),
			},
			{
				Config: config(`pod_template_ref = { name = "web" }
    replicas = 2`),
				Check: resource.ComposeTestCheckFunc(
					resource.TestCheckResourceAttr("dovetail_capacity_buffer.spare", "id", "default/spare"),
					resource.TestCheckResourceAttr("dovetail_capacity_buffer.spare", "namespace", "default"),
					func(*terraform.State) error {
						cb, err := get()
						if err != nil {
							return err
						}
						if cb.Spec.Replicas == nil || *cb.Spec.Replicas != 2 || cb.Spec.PodTemplateRef == nil || cb.Spec.PodTemplateRef.Name != "web" {
							return fmt.Errorf("the buffer's spec is %+v", cb.Spec)
						}
						return nil
					}),
			},
			{
				Config: config(`scalable_ref = { api_group = "apps", kind = "Deployment", name = "web" }
    percentage = 20`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_capacity_buffer.spare", plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					cb, err := get()
					if err != nil {
						return err
					}
					if cb.Spec.Percentage == nil || *cb.Spec.Percentage != 20 || cb.Spec.PodTemplateRef != nil || cb.Spec.ScalableRef == nil {
						return fmt.Errorf("the buffer's spec is %+v", cb.Spec)
					}
					return nil
				},
			},
			{
				ResourceName:            "dovetail_capacity_buffer.spare",
				ImportState:             true,
				ImportStateId:           "default/spare",
				ImportStateVerify:       true,
				ImportStateVerifyIgnore: []string{"timeouts", "status"},
			},
		},
	})
}

// TestAccCommitment: dovetail_commitment applies a Commitment of the shape
// (zonal RIs, a Compute and an EC2Instance Savings Plan); a plan the controller
// could not use fails at plan naming the field; an update changes it in place.
func TestAccCommitment(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	api := testenv.StartAPIServer(t)
	config := func(spec string) string {
		return kubeProvider(api.Kubeconfig) + `
resource "dovetail_commitment" "ri" {
  name = "ri-m5"
  spec = {
    ` + spec + `
  }
}
`
	}
	get := func() *dovetailv1alpha1.Commitment {
		c := &dovetailv1alpha1.Commitment{}
		if err := api.Client.Get(ctx, client.ObjectKey{Name: "ri-m5"}, c); err != nil {
			t.Fatal(err)
		}
		return c
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      config(`savings_plans = [{ type = "Compute", commitment_per_hour = "25", discount = "28" }]`),
				ExpectError: regexp.MustCompile(`discount`),
			},
			{
				Config:      config(`savings_plans = [{ type = "EC2Instance", commitment_per_hour = "25", discount = "0.4" }]`),
				ExpectError: regexp.MustCompile(`family is required for an EC2Instance savings plan`),
			},
			{
				Config: config(`reserved_instances = [{ instance_type = "m5.2xlarge", zone = "us-east-1a", count = 4 }]
    savings_plans = [
      { type = "Compute", commitment_per_hour = "25.00", discount = "0.28" },
      { type = "EC2Instance", family = "m7i", commitment_per_hour = "10.00", discount = "0.40" },
    ]`),
				Check: func(*terraform.State) error {
					c := get()
					if len(c.Spec.ReservedInstances) != 1 || c.Spec.ReservedInstances[0].Count != 4 || c.Spec.ReservedInstances[0].Zone != "us-east-1a" ||
						len(c.Spec.SavingsPlans) != 2 || c.Spec.SavingsPlans[1].Family != "m7i" || c.Spec.SavingsPlans[1].Discount != "0.40" {
						return fmt.Errorf("the commitment's spec is %+v", c.Spec)
					}
					return nil
				},
			},
			{
				Config:           config(`reserved_instances = [{ instance_type = "m5.2xlarge", count = 6 }]`),
				ConfigPlanChecks: resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction("dovetail_commitment.ri", plancheck.ResourceActionUpdate)}},
				Check: func(*terraform.State) error {
					c := get()
					if len(c.Spec.SavingsPlans) != 0 || c.Spec.ReservedInstances[0].Count != 6 || c.Spec.ReservedInstances[0].Zone != "" {
						return fmt.Errorf("the commitment's spec is %+v", c.Spec)
					}
					return nil
				},
			},
		},
	})
}
