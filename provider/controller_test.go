package provider_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/plancheck"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/templates"
	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// controllerConfig installs the controller and, depending on it, a node class and a
// pool: the CRDs they need arrive in the same apply.
// chartValues are chart values a Karpenter user sets in Helm, as helm_release takes them.
const chartValues = `values = [yamlencode({
    podAnnotations = { "example.com/team" = "platform" }
    tolerations    = [{ key = "CriticalAddonsOnly", operator = "Exists" }, { key = "dedicated", operator = "Equal", value = "system", effect = "NoSchedule" }]
    settings       = { vmMemoryOverheadPercent = 0.1, reservedENIs = "1" }
  })]`

func controllerConfig(kubeconfig string, replicas int, logLevel, timeout string, values ...string) string {
	return kubeProvider(kubeconfig) + fmt.Sprintf(`
resource "dovetail_controller" "this" {
  cluster_name       = "demo"
  aws_region         = "us-west-2"
  irsa_role_arn      = "arn:aws:iam::123456789012:role/dovetail"
  interruption_queue = "demo-interruptions"
  feature_gates      = { SpotToSpotConsolidation = true, StaticCapacity = true }
  replicas           = %d
  log_level          = %q
  timeouts {
    create = %[3]q
    update = %[3]q
  }
  # Nodes in private subnets; a stronger preference for fewer nodes.
  public_ipv4_price_per_hour = 0
  fewer_nodes_tolerance      = 0.05
  %s
  image = %[5]q
}
`+nodeClassConfig("", "depends_on = [dovetail_controller.this]")+`

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
  depends_on = [dovetail_controller.this]
}
`, replicas, logLevel, timeout, strings.Join(values, "\n"), testenv.ControllerImage)
}

func TestAccController(t *testing.T) {
	acceptance(t)
	ctx := context.Background()
	stack := testenv.StartStackWithoutCRDs(t)
	kube := stack.Client
	testenv.AddSystemNodes(t, kube, 2)
	deployment := func() (*appsv1.Deployment, error) {
		d := &appsv1.Deployment{}
		return d, kube.Get(ctx, client.ObjectKey{Namespace: "dovetail", Name: "dovetail"}, d)
	}
	rolledOut := func(replicas int32, logLevel string, withValues bool) resource.TestCheckFunc {
		return func(*terraform.State) error {
			d, err := deployment()
			if err != nil {
				return err
			}
			if *d.Spec.Replicas != replicas || d.Status.AvailableReplicas != replicas || d.Status.UpdatedReplicas != replicas {
				return fmt.Errorf("deployment %d replicas, %d available, %d updated; want %d", *d.Spec.Replicas, d.Status.AvailableReplicas, d.Status.UpdatedReplicas, replicas)
			}
			env := map[string]string{}
			for _, e := range d.Spec.Template.Spec.Containers[0].Env {
				env[e.Name] = e.Value
			}
			if has := d.Spec.Template.Annotations["example.com/team"] == "platform" && len(d.Spec.Template.Spec.Tolerations) == 2 &&
				env["VM_MEMORY_OVERHEAD_PERCENT"] == "0.1" && env["RESERVED_ENIS"] == "1"; has != withValues {
				return fmt.Errorf("chart values given %v, but the pods have annotations %v, tolerations %v, env %v", withValues, d.Spec.Template.Annotations, d.Spec.Template.Spec.Tolerations, env)
			}
			if env["LOG_LEVEL"] != logLevel || env["CLUSTER_NAME"] != "demo" || env["INTERRUPTION_QUEUE"] != "demo-interruptions" || env["FEATURE_GATES"] != "SpotToSpotConsolidation=true,StaticCapacity=true" ||
				env["PUBLIC_IPV4_PRICE_PER_HOUR"] != "0" || env["FEWER_NODES_TOLERANCE"] != "0.05" {
				return fmt.Errorf("controller environment %v", env)
			}
			return nil
		}
	}
	installed := func(*terraform.State) error {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := kube.Get(ctx, client.ObjectKey{Name: "nodepools.karpenter.sh"}, crd); err != nil {
			return fmt.Errorf("NodePool CRD: %w", err)
		}
		sa := &corev1.ServiceAccount{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "dovetail", Name: "dovetail"}, sa); err != nil {
			return err
		}
		if sa.Annotations["eks.amazonaws.com/role-arn"] != "arn:aws:iam::123456789012:role/dovetail" {
			return fmt.Errorf("service account annotations %v", sa.Annotations)
		}
		np := &v1.NodePool{}
		return kube.Get(ctx, client.ObjectKey{Name: "general"}, np)
	}
	const addr = "dovetail_controller.this"
	update := resource.ConfigPlanChecks{PreApply: []plancheck.PlanCheck{plancheck.ExpectResourceAction(addr, plancheck.ResourceActionUpdate)}}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		CheckDestroy: func(*terraform.State) error {
			for _, obj := range []client.Object{
				&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodepools.karpenter.sh")},
				&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "nodeclaims.karpenter.sh")},
				&apiextensionsv1.CustomResourceDefinition{ObjectMeta: metaName("", "ec2nodeclasses.karpenter.k8s.aws")},
				&appsv1.Deployment{ObjectMeta: metaName("dovetail", "dovetail")},
				&rbacv1.ClusterRole{ObjectMeta: metaName("", "dovetail")},
				&rbacv1.ClusterRoleBinding{ObjectMeta: metaName("", "dovetail")},
			} {
				if err := kube.Get(ctx, client.ObjectKeyFromObject(obj), obj); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%T %s is still there (%v)", obj, obj.GetName(), err)
				}
			}
			// No namespace controller runs here, so the namespace stays Terminating.
			ns := &corev1.Namespace{}
			if err := kube.Get(ctx, client.ObjectKey{Name: "dovetail"}, ns); err == nil && ns.DeletionTimestamp == nil {
				return fmt.Errorf("the namespace was not deleted")
			}
			return nil
		},
		Steps: []resource.TestStep{
			{
				Config: controllerConfig(stack.Kubeconfig, 2, "info", "2m", chartValues),
				Check: resource.ComposeTestCheckFunc(installed, rolledOut(2, "info", true),
					func(*terraform.State) error { return provisionsAsServiceAccount(t, stack) }),
			},
			{
				Config:           controllerConfig(stack.Kubeconfig, 2, "debug", "2m", chartValues),
				ConfigPlanChecks: update,
				Check:            rolledOut(2, "debug", true),
			},
			{
				// kubectl scale is drift, put back by the next apply.
				PreConfig: func() {
					d, err := deployment()
					if err != nil {
						t.Fatal(err)
					}
					one := int32(1)
					d.Spec.Replicas = &one
					if err := kube.Update(ctx, d, client.FieldOwner("kubectl-scale")); err != nil {
						t.Fatal(err)
					}
				},
				Config:           controllerConfig(stack.Kubeconfig, 2, "debug", "2m", chartValues),
				ConfigPlanChecks: update,
				Check:            rolledOut(2, "debug", true),
			},
			{
				// A third replica has no node of its own: the apply says so.
				Config:      controllerConfig(stack.Kubeconfig, 3, "debug", "10s", chartValues),
				ExpectError: regexp.MustCompile(`(?s)did not roll out.*pod dovetail-\S+ is\s+not\s+scheduled:.*anti-affinity.*Gave\s+up\s+after\s+10s\s+\(timeouts\s+\{\s+update\s+=\s+"20s"\s+\}`),
			},
			{
				// Values removed are removed from the pods; import reads what is
				// there, which values no longer add to.
				Config: controllerConfig(stack.Kubeconfig, 2, "debug", "2m"),
				Check:  rolledOut(2, "debug", false),
			},
			{
				ResourceName:      addr,
				ImportState:       true,
				ImportStateVerify: true,
				ImportStateId:     "dovetail/dovetail",
			},
			{
				// Imported with an import block under the configuration that made it, it
				// plans nothing else: no replacement, no update.
				ResourceName: addr, ImportState: true, ImportStateKind: resource.ImportBlockWithID, ImportStateId: "dovetail/dovetail",
			},
			{
				// Deleted by hand: the next apply installs it again.
				PreConfig: func() {
					d, err := deployment()
					if err != nil {
						t.Fatal(err)
					}
					if err := kube.Delete(ctx, d); err != nil {
						t.Fatal(err)
					}
				},
				Config:           controllerConfig(stack.Kubeconfig, 2, "debug", "2m", chartValues),
				ConfigPlanChecks: update,
				Check:            rolledOut(2, "debug", true),
			},
		},
	})
}

// provisionsAsServiceAccount runs the controller with nothing but the installed RBAC
// (impersonating its ServiceAccount) and checks it launches nodes for pending pods and
// takes them down again: the ClusterRole is enough, and the installation works.
func provisionsAsServiceAccount(t *testing.T, stack *testenv.Stack) error {
	ctx := context.Background()
	cfg := rest.CopyConfig(stack.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:dovetail:dovetail", Groups: []string{"system:serviceaccounts", "system:serviceaccounts:dovetail"}}
	// The kwok provider plays the cloud and the kubelet: it creates Nodes and reports
	// their status. Its own role grants that, apart from the installed one, which an
	// AWS cluster's controller never needs.
	values := templates.DefaultValues()
	values.Image = testenv.ControllerImage
	values.Settings.ClusterName = "demo"
	kwokRBAC, err := templates.KwokProviderManifests(values)
	if err != nil {
		return err
	}
	for _, obj := range kwokRBAC {
		if err := stack.Client.Create(ctx, obj); err != nil {
			return err
		}
	}
	opts := testenv.DefaultOptions(t)
	opts.ClusterName = "demo"
	opts.LeaderElect = true
	opts.LeaderElectionNamespace = "dovetail"
	testenv.RunController(t, cfg, t.TempDir(), opts, nil)
	web := localstack.Deployment("web", 3, "1", "1Gi", func(p *corev1.PodSpec) {
		p.NodeSelector = map[string]string{v1.LabelNodePool: "general"}
	})
	if err := stack.Client.Create(ctx, web); err != nil {
		return err
	}
	running := func() error {
		pods := &corev1.PodList{}
		if err := stack.Client.List(ctx, pods, client.MatchingLabels{"app": "web"}); err != nil {
			return err
		}
		n := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				n++
			}
		}
		if n != 3 {
			return fmt.Errorf("%d of 3 pods running", n)
		}
		return nil
	}
	testenv.Eventually(t, 2*time.Minute, "the controller, with its own RBAC only, runs the pods", running)
	// Leave no NodeClaims for the destroy to wait on... except through the pool: the
	// destroy deletes the pool and waits for its claims, which this controller drains.
	return stack.Client.Delete(ctx, web)
}

func metaName(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}

func TestControllerPlanTimeValidation(t *testing.T) {
	acceptance(t)
	controller := func(attrs string) string {
		return `
provider "dovetail" {
  kubernetes {
    host = "https://127.0.0.1:1"
  }
}
resource "dovetail_controller" "this" {
  cluster_name = "demo"
  image        = "` + testenv.ControllerImage + `"
  ` + attrs + `
}`
	}
	cases := map[string]struct{ config, want string }{
		"bad duration":             {controller(`aws_region = "us-west-2"` + "\n" + `batch_idle_duration = "1 second"`), `"1 second" is not a positive duration; write it like 10s, 5m or 1h30m`},
		"bad quantity":             {controller(`aws_region = "us-west-2"` + "\n" + `memory = "1 GB"`), `"1 GB" is not a Kubernetes quantity`},
		"unknown feature gate":     {controller(`aws_region = "us-west-2"` + "\n" + `feature_gates = { Drift = true }`), `value must be one of: \["SpotToSpotConsolidation" "ReservedCapacity" "NodeRepair" "NodeOverlay"\s+"StaticCapacity" "CapacityBuffer"\], got: "Drift"`},
		"values set an attribute":  {controller(`aws_region = "us-west-2"` + "\n" + `values = [yamlencode({ replicas = 3 })]`), `replicas is set by this resource's replicas attribute; set it there, not in values`},
		"values not a mapping":     {controller(`aws_region = "us-west-2"` + "\n" + `values = ["- a\n- b"]`), `not a YAML mapping of chart values`},
		"values the chart refuses": {controller(`aws_region = "us-west-2"` + "\n" + `values = [yamlencode({ dnsPolicy = "Sometimes" })]`), `at '/dnsPolicy': value must be one of 'ClusterFirst'`},
		"values set a setting attribute": {controller(`aws_region = "us-west-2"` + "\n" + `values = [yamlencode({ settings = { clusterName = "other" } })]`),
			`settings.clusterName is set by this resource's cluster_name attribute`},
		"values a setting not supported": {controller(`aws_region = "us-west-2"` + "\n" + `values = [yamlencode({ settings = { minValuesPolicy = "BestEffort" } })]`),
			`settings.minValuesPolicy: BestEffort is not supported yet`},
		"role name, not ARN": {controller(`aws_region = "us-west-2"` + "\n" + `irsa_role_arn = "dovetail"`), `must be an IAM role ARN`},
		"no region":          {controller(``), `Set aws_region on dovetail_controller, or add aws { region = "..." }`},
		"negative node cost": {controller(`aws_region = "us-west-2"` + "\n" + `node_overhead_price_per_hour = -0.01`), `"-0.01" is not a decimal number of at least 0, such as 0.005`},
		"tolerance over 50%": {controller(`aws_region = "us-west-2"` + "\n" + `fewer_nodes_tolerance = 2`), `"2" is not a decimal number from 0 to 0.5, such as 0.02`},
		// The tests' provider is built from source, as a user's `go build` is.
		"no image from a build from source": {strings.Replace(controller(`aws_region = "us-west-2"`), `image        = "`+testenv.ControllerImage+`"`, "", 1),
			`(?s)image is required.*this build of Dovetail is not a release, so it has no controller image of its own`},
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
