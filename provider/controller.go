package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/booldefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/boolplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/int64default"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sresource "k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/operator"
	"github.com/dovetail-sh/dovetail/templates"
)

// NewControllerResource is dovetail_controller: the controller installed in the cluster.
func NewControllerResource() resource.Resource { return &controllerResource{} }

type controllerResource struct{ withClients }

type controllerModel struct {
	ID                types.String `tfsdk:"id"`
	Name              types.String `tfsdk:"name"`
	Namespace         types.String `tfsdk:"namespace"`
	CreateNamespace   types.Bool   `tfsdk:"create_namespace"`
	ServiceAccount    types.String `tfsdk:"service_account"`
	Image             types.String `tfsdk:"image"`
	Replicas          types.Int64  `tfsdk:"replicas"`
	CPU               types.String `tfsdk:"cpu"`
	Memory            types.String `tfsdk:"memory"`
	IRSARoleARN       types.String `tfsdk:"irsa_role_arn"`
	ClusterName       types.String `tfsdk:"cluster_name"`
	ClusterEndpoint   types.String `tfsdk:"cluster_endpoint"`
	AWSRegion         types.String `tfsdk:"aws_region"`
	InterruptionQueue types.String `tfsdk:"interruption_queue"`
	IsolatedVPC       types.Bool   `tfsdk:"isolated_vpc"`
	FeatureGates      types.Map    `tfsdk:"feature_gates"`
	LogLevel          types.String `tfsdk:"log_level"`
	BatchIdleDuration types.String `tfsdk:"batch_idle_duration"`
	BatchMaxDuration  types.String `tfsdk:"batch_max_duration"`
	AWSEndpoints      types.Map    `tfsdk:"aws_endpoints"`
	// What a node costs beyond its instance, for the packing objective.
	RootVolumePricePerGiBMonth types.String `tfsdk:"root_volume_price_per_gib_month"`
	PublicIPv4PricePerHour     types.String `tfsdk:"public_ipv4_price_per_hour"`
	NodeOverheadPricePerHour   types.String `tfsdk:"node_overhead_price_per_hour"`
	FewerNodesTolerance        types.String `tfsdk:"fewer_nodes_tolerance"`
	WaitForRollout             types.Bool   `tfsdk:"wait_for_rollout"`
	RolloutTimeout             types.String `tfsdk:"rollout_timeout"`
	ManifestsSHA256            types.String `tfsdk:"manifests_sha256"`
}

func (r *controllerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_controller"
}

func (r *controllerResource) Schema(_ context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	d := templates.DefaultValues()
	replace := []planmodifier.String{stringplanmodifier.RequiresReplace()}
	duration := []validator.String{goDuration{}}
	nonNegative := []validator.String{decimal{max: math.Inf(1), example: "0.005"}}
	resp.Schema = schema.Schema{
		Description: "Installs Dovetail in the cluster: the CRDs (upgraded before the Deployment), the namespace, a ServiceAccount (annotated for IRSA, or named by an EKS Pod Identity association), least-privilege RBAC, " +
			"the controller Deployment (leader-elected replicas spread over zones and hosts, a PodDisruptionBudget, non-root with a read-only root filesystem, probes) and its metrics Service, then waits for the rollout. " +
			"The manifests are the ones `dovetail render` prints.\n\n" +
			"Destroying it deletes the CRDs, and deleting a CRD deletes every object of its kind in the cluster. So the destroy deletes nothing, and fails naming them, while any NodePool or EC2NodeClass exists in the cluster, " +
			"including ones this Terraform state does not manage: give every `dovetail_node_pool` and `dovetail_ec2_node_class` `depends_on = [dovetail_controller.this]` (modules/dovetail does; give modules/node-pools `depends_on = [module.dovetail]`), so Terraform destroys them, and their nodes, first; " +
			"delete the others where they were made (another state, GitOps, `kubectl delete nodepool NAME`) before destroying the controller. Objects already being deleted are waited for while the controller finalizes them.",
		Attributes: map[string]schema.Attribute{
			"id":               schema.StringAttribute{Computed: true, Description: "namespace/name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
			"name":             schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Name), PlanModifiers: replace, Validators: []validator.String{dnsSubdomain{}}, Description: "Name of the Deployment, Service, PDB and RBAC objects."},
			"namespace":        schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Namespace), PlanModifiers: replace, Validators: []validator.String{dnsSubdomain{}}, Description: "Namespace of the controller."},
			"create_namespace": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()}, Description: "Create the namespace (and delete it on destroy); false for an existing one such as kube-system."},
			"service_account":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.ServiceAccount), PlanModifiers: replace, Validators: []validator.String{dnsSubdomain{}}, Description: "ServiceAccount name; with EKS Pod Identity, the association (aws_eks_pod_identity_association) names this account and namespace."},
			"image":            schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Image), Description: "Controller image; a private cluster mirrors it into ECR."},
			"replicas":         schema.Int64Attribute{Optional: true, Computed: true, Default: int64default.StaticInt64(int64(d.Replicas)), Validators: []validator.Int64{int64validator.AtLeast(1)}, Description: "Replicas; one leads, the others stand by. Each needs its own node."},
			"cpu":              schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.CPU), Validators: []validator.String{quantity{}}, Description: "CPU request."},
			"memory":           schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Memory), Validators: []validator.String{quantity{}}, Description: "Memory request and limit."},
			"irsa_role_arn": schema.StringAttribute{Optional: true, Description: "Annotate the ServiceAccount for IAM Roles for Service Accounts with this role (dovetail_controller_role with oidc_provider_arn). Leave unset with EKS Pod Identity.",
				Validators: []validator.String{stringvalidator.RegexMatches(regexp.MustCompile(`^arn:aws[a-z-]*:iam::\d{12}:role/.+$`), "must be an IAM role ARN, e.g. arn:aws:iam::123456789012:role/dovetail")}},
			"cluster_name":       schema.StringAttribute{Required: true, Validators: []validator.String{clusterNameValidator}, Description: "EKS cluster name: instances are tagged and found by it."},
			"cluster_endpoint":   schema.StringAttribute{Optional: true, Description: "API server URL nodes join; read from EKS DescribeCluster when unset."},
			"aws_region":         schema.StringAttribute{Optional: true, Description: "AWS region of the cluster; the provider's aws region when unset."},
			"interruption_queue": schema.StringAttribute{Optional: true, Description: "SQS queue of spot interruptions and maintenance events (dovetail_interruption_queue.name); unset turns interruption handling off."},
			"isolated_vpc":       schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false), Description: "The cluster has no internet route: never call the Pricing API (it has no VPC endpoint) and use the embedded prices."},
			"feature_gates": schema.MapAttribute{Optional: true, ElementType: types.BoolType, Description: "Feature gates: SpotToSpotConsolidation; NodeRepair must stay false (node repair is not implemented yet).",
				Validators: []validator.Map{mapvalidator.KeysAre(stringvalidator.OneOf("SpotToSpotConsolidation", "NodeRepair")), notImplementedGate{"NodeRepair", "node repair"}}},
			"log_level":           schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.LogLevel), Validators: []validator.String{stringvalidator.OneOf("debug", "info", "error")}},
			"batch_idle_duration": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.BatchIdleDuration), Validators: duration, Description: "Close a provisioning batch after this long without new pending pods."},
			"batch_max_duration":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.BatchMaxDuration), Validators: duration, Description: "Close a provisioning batch after this long regardless."},
			"aws_endpoints": schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Endpoint URL per AWS service the controller calls (" + strings.Join(operator.AWSServices, ", ") + "); private DNS of VPC endpoints makes this unnecessary.",
				Validators: []validator.Map{mapvalidator.KeysAre(stringvalidator.OneOf(operator.AWSServices...))}},
			"root_volume_price_per_gib_month": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.RootVolumePricePerGiBMonth), Validators: nonNegative,
				Description: "Price of a node's root volume per GiB-month (gp3: 0.08), part of what each node costs beyond its instance when plans are compared."},
			"public_ipv4_price_per_hour": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.PublicIPv4PricePerHour), Validators: nonNegative,
				Description: "Price of a node's public IPv4 address per hour; 0 when nodes run in private subnets."},
			"node_overhead_price_per_hour": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.NodeOverheadPricePerHour), Validators: nonNegative,
				Description: "Operational cost of one more node per hour (API load, IP addresses, image pulls, blast radius): raise it to prefer fewer, larger nodes."},
			"fewer_nodes_tolerance": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.FewerNodesTolerance), Validators: []validator.String{decimal{max: 0.5, example: "0.02"}},
				Description: "How much more per unit of demand, as a fraction (0.02 is 2%), a plan may pay to use fewer, larger nodes."},
			"wait_for_rollout": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), Description: "Wait until every replica of the new version is available."},
			"rollout_timeout":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("5m"), Validators: duration, Description: "How long to wait for the rollout."},
			"manifests_sha256": schema.StringAttribute{Computed: true, Description: "Digest of the applied manifests. When the objects in the cluster differ from them (say, after kubectl edit or scale), refresh records what drifted here and the plan applies them again."},
		},
	}
}

var clusterNameValidator = stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`), "must be an EKS cluster name: 1-100 letters, digits, - and _, starting with a letter or digit")

func (r *controllerResource) values(m *controllerModel) templates.Values {
	v := templates.Values{
		Name: m.Name.ValueString(), Namespace: m.Namespace.ValueString(), CreateNamespace: m.CreateNamespace.ValueBool(),
		ServiceAccount: m.ServiceAccount.ValueString(), Image: m.Image.ValueString(), Replicas: int(m.Replicas.ValueInt64()),
		CPU: m.CPU.ValueString(), Memory: m.Memory.ValueString(), IRSARoleARN: m.IRSARoleARN.ValueString(),
		Settings: templates.Settings{
			ClusterName: m.ClusterName.ValueString(), ClusterEndpoint: m.ClusterEndpoint.ValueString(), AWSRegion: m.AWSRegion.ValueString(),
			InterruptionQueue: m.InterruptionQueue.ValueString(), IsolatedVPC: m.IsolatedVPC.ValueBool(), LogLevel: m.LogLevel.ValueString(),
			BatchIdleDuration: m.BatchIdleDuration.ValueString(), BatchMaxDuration: m.BatchMaxDuration.ValueString(),
			AWSEndpoints:               mapStrings(m.AWSEndpoints),
			RootVolumePricePerGiBMonth: m.RootVolumePricePerGiBMonth.ValueString(), PublicIPv4PricePerHour: m.PublicIPv4PricePerHour.ValueString(),
			NodeOverheadPricePerHour: m.NodeOverheadPricePerHour.ValueString(), FewerNodesTolerance: m.FewerNodesTolerance.ValueString(),
		},
	}
	if v.Settings.AWSRegion == "" && r.clients != nil && r.clients.AWS != nil {
		v.Settings.AWSRegion = r.clients.AWS.Region
	}
	if !m.FeatureGates.IsNull() {
		v.Settings.FeatureGates = map[string]bool{}
		for k, val := range m.FeatureGates.Elements() {
			if b, ok := val.(types.Bool); ok {
				v.Settings.FeatureGates[k] = b.ValueBool()
			}
		}
	}
	return v
}

// render is everything applied, CRDs first, and the digest the plan shows.
func (r *controllerResource) render(m *controllerModel) ([]*unstructured.Unstructured, string, error) {
	crds, err := templates.CRDObjects()
	if err != nil {
		return nil, "", err
	}
	objs, err := templates.Manifests(r.values(m))
	if err != nil {
		return nil, "", err
	}
	all := append(crds, objs...)
	h := sha256.New()
	for _, o := range all {
		raw, err := o.MarshalJSON()
		if err != nil {
			return nil, "", err
		}
		h.Write(raw)
	}
	return all, hex.EncodeToString(h.Sum(nil)), nil
}

func (r *controllerResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	requireKubernetes(r.clients, "dovetail_controller", &resp.Diagnostics)
	var plan controllerModel
	resp.Diagnostics.Append(req.Plan.Get(ctx, &plan)...)
	if resp.Diagnostics.HasError() {
		return
	}
	if plan.AWSRegion.IsNull() && (r.clients == nil || r.clients.AWS == nil) {
		resp.Diagnostics.AddAttributeError(path.Root("aws_region"), "No AWS region for the controller",
			"Set aws_region on dovetail_controller, or add aws { region = \"...\" } to the provider \"dovetail\" block.")
		return
	}
	if !req.Plan.Raw.IsFullyKnown() {
		plan.ManifestsSHA256 = types.StringUnknown()
	} else if _, digest, err := r.render(&plan); err != nil {
		resp.Diagnostics.AddError("Cannot render the controller's manifests", err.Error())
		return
	} else {
		plan.ManifestsSHA256 = types.StringValue(digest)
	}
	plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	resp.Diagnostics.Append(resp.Plan.Set(ctx, &plan)...)
}

func (r *controllerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.install(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

func (r *controllerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.install(ctx, req.Plan, &resp.State, &resp.Diagnostics)
}

// waitNamespaceTerminated waits out the deletion of a namespace a previous destroy
// left terminating (destroy does not wait for it: its finalizers run in the
// cluster's namespace controller), since nothing can be created in it meanwhile.
func waitNamespaceTerminated(ctx context.Context, cl client.Client, name string) error {
	err := wait.PollUntilContextTimeout(ctx, time.Second, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		var ns corev1.Namespace
		err := cl.Get(ctx, client.ObjectKey{Name: name}, &ns)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && ns.DeletionTimestamp == nil, err
	})
	if err != nil {
		return fmt.Errorf("namespace %s has been terminating for 5 minutes; check what holds it with `kubectl get namespace %s -o yaml` (status.conditions), %w", name, name, err)
	}
	return nil
}

type stateSetter interface {
	Set(ctx context.Context, val any) diag.Diagnostics
}

type planGetter interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// install applies the CRDs, waits until they are served, applies the rest in order and
// waits for the rollout. State is recorded as soon as objects exist, so a failed
// rollout leaves a tainted resource rather than unrecorded objects.
func (r *controllerResource) install(ctx context.Context, planned planGetter, state stateSetter, diags *diag.Diagnostics) {
	var plan controllerModel
	diags.Append(planned.Get(ctx, &plan)...)
	cl := kubeClient(r.clients, diags)
	if diags.HasError() {
		return
	}
	objs, digest, err := r.render(&plan)
	if err != nil {
		diags.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	plan.ManifestsSHA256 = types.StringValue(digest)
	plan.ID = types.StringValue(plan.Namespace.ValueString() + "/" + plan.Name.ValueString())
	var crdNames []string
	for i, obj := range objs {
		if obj.GetKind() == "Namespace" {
			if err := waitNamespaceTerminated(ctx, cl, obj.GetName()); err != nil {
				diags.AddError("The controller's namespace is still being deleted", err.Error())
				return
			}
		}
		if err := cl.Patch(ctx, obj, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
			if i > 0 {
				diags.Append(state.Set(ctx, &plan)...)
			}
			diags.AddError(fmt.Sprintf("Cannot apply %s %s", obj.GetKind(), objectName(obj)), err.Error())
			return
		}
		if obj.GetKind() == "CustomResourceDefinition" {
			crdNames = append(crdNames, obj.GetName())
			continue
		}
		if len(crdNames) > 0 {
			// Upgrade order: the new CRDs are served before the controller that needs them starts.
			if err := waitEstablished(ctx, cl, crdNames); err != nil {
				diags.Append(state.Set(ctx, &plan)...)
				diags.AddError("The CRDs are not served", err.Error())
				return
			}
			crdNames = nil
		}
	}
	diags.Append(state.Set(ctx, &plan)...)
	if !plan.WaitForRollout.ValueBool() {
		return
	}
	timeout, _ := time.ParseDuration(plan.RolloutTimeout.ValueString())
	if err := r.waitForRollout(ctx, cl, plan.Namespace.ValueString(), plan.Name.ValueString(), timeout); err != nil {
		diags.AddError("The controller did not roll out", err.Error())
	}
}

func objectName(o client.Object) string {
	if o.GetNamespace() != "" {
		return o.GetNamespace() + "/" + o.GetName()
	}
	return o.GetName()
}

func waitEstablished(ctx context.Context, cl client.Client, names []string) error {
	pending := names
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		var still []string
		for _, n := range pending {
			crd := &unstructured.Unstructured{}
			crd.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
			if err := cl.Get(ctx, client.ObjectKey{Name: n}, crd); err != nil {
				return false, err
			}
			conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				if m["type"] == "Established" && m["status"] == "True" {
					established = true
				}
			}
			if !established {
				still = append(still, n)
			}
		}
		pending = still
		return len(pending) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%v not established after a minute: %w", pending, err)
	}
	return nil
}

// waitForRollout waits until the Deployment's new ReplicaSet is fully available, and
// otherwise says why: unschedulable pods, failing containers, warning events.
func (r *controllerResource) waitForRollout(ctx context.Context, cl client.Client, namespace, name string, timeout time.Duration) error {
	deploy := &appsv1.Deployment{}
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		if err := cl.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, deploy); err != nil {
			return false, nil
		}
		want := int32(1)
		if deploy.Spec.Replicas != nil {
			want = *deploy.Spec.Replicas
		}
		s := deploy.Status
		return s.ObservedGeneration >= deploy.Generation && s.UpdatedReplicas == want && s.AvailableReplicas == want && s.Replicas == want, nil
	})
	if err == nil {
		return nil
	}
	reasons := []string{fmt.Sprintf("Deployment %s/%s after %s: %d of %d replicas updated, %d available.", namespace, name, timeout,
		deploy.Status.UpdatedReplicas, ptrValue(deploy.Spec.Replicas), deploy.Status.AvailableReplicas)}
	for _, c := range deploy.Status.Conditions {
		if c.Status != corev1.ConditionTrue && c.Message != "" {
			reasons = append(reasons, fmt.Sprintf("%s: %s", c.Type, c.Message))
		}
	}
	pods := &corev1.PodList{}
	if err := cl.List(ctx, pods, client.InNamespace(namespace), client.MatchingLabels{"app.kubernetes.io/instance": name, "app.kubernetes.io/name": "dovetail"}); err == nil {
		for _, p := range pods.Items {
			reasons = append(reasons, podProblems(&p)...)
		}
	}
	events := &corev1.EventList{}
	if err := cl.List(ctx, events, client.InNamespace(namespace)); err == nil {
		sort.Slice(events.Items, func(i, j int) bool { return events.Items[i].LastTimestamp.After(events.Items[j].LastTimestamp.Time) })
		shown := 0
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && shown < 5 {
				reasons = append(reasons, fmt.Sprintf("event %s %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
				shown++
			}
		}
	}
	return fmt.Errorf("%s", strings.Join(reasons, "\n"))
}

func podProblems(p *corev1.Pod) []string {
	var out []string
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			out = append(out, fmt.Sprintf("pod %s is not scheduled: %s", p.Name, c.Message))
		}
	}
	for _, cs := range p.Status.ContainerStatuses {
		if w := cs.State.Waiting; w != nil && w.Reason != "" {
			out = append(out, fmt.Sprintf("pod %s container %s is waiting: %s %s", p.Name, cs.Name, w.Reason, w.Message))
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			out = append(out, fmt.Sprintf("pod %s container %s exited %d: %s %s", p.Name, cs.Name, t.ExitCode, t.Reason, t.Message))
		}
	}
	return out
}

func ptrValue(p *int32) int32 {
	if p == nil {
		return 1
	}
	return *p
}

// Read compares each object with what applying it again would make it (a server-side
// dry run), so kubectl edits and scales show as drift; a missing installation is gone.
func (r *controllerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state controllerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	cl := kubeClient(r.clients, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	imported := state.ClusterName.IsNull()
	if imported {
		if !r.importFromCluster(ctx, cl, &state, &resp.Diagnostics) {
			resp.State.RemoveResource(ctx)
			return
		}
	}
	objs, digest, err := r.render(&state)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	var drift []string
	missing := 0
	for _, want := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		err := cl.Get(ctx, client.ObjectKeyFromObject(want), live)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			drift = append(drift, want.GetKind()+" "+objectName(want)+" is missing")
			missing++
			continue
		}
		if err != nil {
			resp.Diagnostics.AddError("Cannot read "+want.GetKind()+" "+objectName(want), err.Error())
			return
		}
		applied := want.DeepCopy()
		if err := cl.Patch(ctx, applied, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager), client.DryRunAll); err != nil {
			resp.Diagnostics.AddError("Cannot compare "+want.GetKind()+" "+objectName(want)+" with its manifest", err.Error())
			return
		}
		if !sameContent(live, applied) {
			drift = append(drift, want.GetKind()+" "+objectName(want)+" differs")
		}
	}
	if missing == len(objs) {
		resp.State.RemoveResource(ctx)
		return
	}
	if len(drift) > 0 {
		state.ManifestsSHA256 = types.StringValue("drifted: " + strings.Join(drift, "; "))
	} else if imported {
		state.ManifestsSHA256 = types.StringValue(digest)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// sameContent compares objects without the fields the server maintains.
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		unstructured.RemoveNestedField(c, "status")
		for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
			unstructured.RemoveNestedField(c, "metadata", f)
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// importFromCluster fills the settings of an imported installation from its
// Deployment and ServiceAccount; false when there is no such Deployment.
func (r *controllerResource) importFromCluster(ctx context.Context, cl client.Client, m *controllerModel, diags *diag.Diagnostics) bool {
	deploy := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}, deploy); err != nil {
		if !apierrors.IsNotFound(err) {
			diags.AddError("Cannot read the controller Deployment", err.Error())
		}
		return false
	}
	spec := deploy.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return false
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	str := func(k string) types.String {
		if v, ok := env[k]; ok && v != "" {
			return types.StringValue(v)
		}
		return types.StringNull()
	}
	m.ServiceAccount = types.StringValue(spec.ServiceAccountName)
	m.Image = types.StringValue(c.Image)
	m.Replicas = types.Int64Value(int64(ptrValue(deploy.Spec.Replicas)))
	m.CPU = types.StringValue(c.Resources.Requests.Cpu().String())
	m.Memory = types.StringValue(c.Resources.Requests.Memory().String())
	m.ClusterName = str("CLUSTER_NAME")
	m.ClusterEndpoint = str("CLUSTER_ENDPOINT")
	m.AWSRegion = str("AWS_REGION")
	m.InterruptionQueue = str("INTERRUPTION_QUEUE")
	m.IsolatedVPC = types.BoolValue(env["ISOLATED_VPC"] == "true")
	m.LogLevel = types.StringValue(env["LOG_LEVEL"])
	m.BatchIdleDuration = types.StringValue(env["BATCH_IDLE_DURATION"])
	m.BatchMaxDuration = types.StringValue(env["BATCH_MAX_DURATION"])
	m.FeatureGates = keyValueMap(env["FEATURE_GATES"], func(v string) attr.Value { return types.BoolValue(v == "true") }, types.BoolType)
	m.AWSEndpoints = keyValueMap(env["AWS_ENDPOINTS"], func(v string) attr.Value { return types.StringValue(v) }, types.StringType)
	// Node costs are rendered only when they differ from the controller's defaults.
	defaults := templates.DefaultSettings()
	orDefault := func(k string, def string) types.String {
		if v := env[k]; v != "" {
			return types.StringValue(v)
		}
		return types.StringValue(def)
	}
	m.RootVolumePricePerGiBMonth = orDefault("ROOT_VOLUME_PRICE_PER_GIB_MONTH", defaults.RootVolumePricePerGiBMonth)
	m.PublicIPv4PricePerHour = orDefault("PUBLIC_IPV4_PRICE_PER_HOUR", defaults.PublicIPv4PricePerHour)
	m.NodeOverheadPricePerHour = orDefault("NODE_OVERHEAD_PRICE_PER_HOUR", defaults.NodeOverheadPricePerHour)
	m.FewerNodesTolerance = orDefault("FEWER_NODES_TOLERANCE", defaults.FewerNodesTolerance)
	ns := &corev1.Namespace{}
	m.CreateNamespace = types.BoolValue(cl.Get(ctx, client.ObjectKey{Name: m.Namespace.ValueString()}, ns) == nil && ns.Labels["app.kubernetes.io/managed-by"] == "dovetail")
	sa := &corev1.ServiceAccount{}
	m.IRSARoleARN = types.StringNull()
	if err := cl.Get(ctx, client.ObjectKey{Namespace: m.Namespace.ValueString(), Name: spec.ServiceAccountName}, sa); err == nil {
		if arn := sa.Annotations["eks.amazonaws.com/role-arn"]; arn != "" {
			m.IRSARoleARN = types.StringValue(arn)
		}
	}
	m.WaitForRollout = types.BoolValue(true)
	m.RolloutTimeout = types.StringValue("5m")
	return true
}

func keyValueMap(s string, value func(string) attr.Value, elem attr.Type) types.Map {
	if s == "" {
		return types.MapNull(elem)
	}
	out := map[string]attr.Value{}
	for _, pair := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = value(v)
		}
	}
	return types.MapValueMust(elem, out)
}

// Delete removes nothing while a NodePool or EC2NodeClass exists in the cluster.
// Deleting the CRDs would delete every one of them, including those another state,
// kubectl or GitOps made, and race the finalizers that terminate their nodes and
// launch templates; so the destroy is refused, naming them, and the user decides.
// The resources of this state go first when they depend on this one. Then it refuses
// while NodeClaims exist: without the controller their instances would be left
// running. CRDs go first, while the controller still runs to finalize what they
// hold; then the controller and its objects.
func (r *controllerResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	var state controllerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	cl := kubeClient(r.clients, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	live, deleting, err := nodeObjects(ctx, cl)
	if err != nil {
		resp.Diagnostics.AddError("Cannot check for NodePools and EC2NodeClasses", err.Error())
		return
	}
	if len(live) > 0 {
		resp.Diagnostics.AddError("NodePools or EC2NodeClasses still exist", refuseDestroyMessage(live))
		return
	}
	// Those already being deleted finish while the controller runs to finalize them.
	if len(deleting) > 0 {
		if err := nodeObjectsGone(ctx, cl, deleteTimeout); err != nil {
			resp.Diagnostics.AddError("NodePools or EC2NodeClasses are still terminating", err.Error())
			return
		}
	}
	if live := liveNodeClaims(ctx, cl); len(live) > 0 {
		resp.Diagnostics.AddError("NodeClaims still exist",
			fmt.Sprintf("%d NodeClaims (%s) still hold instances. Delete their NodePools first (Terraform does when they depend on this resource) and let the controller terminate the instances; removing the controller now would leave them running.",
				len(live), strings.Join(live, ", ")))
		return
	}
	// Claims already being deleted (their pool went first) finish while the controller runs.
	if err := nodeClaimsGone(ctx, cl, nil, deleteTimeout); err != nil {
		resp.Diagnostics.AddError("NodeClaims are still terminating", err.Error())
		return
	}
	objs, _, err := r.render(&state)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	var crds, rest []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds = append(crds, o)
		} else {
			rest = append([]*unstructured.Unstructured{o}, rest...)
		}
	}
	for _, o := range append(crds, rest...) {
		if err := cl.Delete(ctx, o, client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil && !apierrors.IsNotFound(err) {
			resp.Diagnostics.AddError("Cannot delete "+o.GetKind()+" "+objectName(o), err.Error())
			return
		}
	}
	// Deletion is asynchronous: CRDs go once their objects do, the Deployment once its
	// pods do (foreground). Wait, so destroy ends with nothing left and a following
	// apply does not race terminating objects. A namespace is left to the namespace
	// controller, which can take much longer.
	var remaining []string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		remaining = remaining[:0]
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue
			}
			live := &unstructured.Unstructured{}
			live.SetGroupVersionKind(o.GroupVersionKind())
			if err := cl.Get(ctx, client.ObjectKeyFromObject(o), live); !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
				remaining = append(remaining, o.GetKind()+" "+objectName(o))
			}
		}
		return len(remaining) == 0, nil
	})
	if err != nil {
		resp.Diagnostics.AddError("The controller's objects are still terminating",
			fmt.Sprintf("After 2 minutes these remain: %s. Custom resources with finalizers can hold a CRD, and pods that do not stop hold the Deployment.", strings.Join(remaining, ", ")))
	}
}

// nodeObjectKinds are the kinds the CRDs hold that users make: deleting a CRD deletes them all.
var nodeObjectKinds = []k8sschema.GroupVersionKind{
	{Group: "karpenter.sh", Version: "v1", Kind: "NodePoolList"},
	{Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClassList"},
}

// nodeObjects names the cluster's NodePools and EC2NodeClasses ("NodePool general"):
// those nobody is deleting, and those being deleted. Without the CRDs there are none.
func nodeObjects(ctx context.Context, cl client.Client) (live, deleting []string, err error) {
	for _, gvk := range nodeObjectKinds {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk)
		if err := cl.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
				continue
			}
			return nil, nil, fmt.Errorf("listing %ss, %w", strings.TrimSuffix(gvk.Kind, "List"), err)
		}
		for _, o := range list.Items {
			name := strings.TrimSuffix(gvk.Kind, "List") + " " + o.GetName()
			if o.GetDeletionTimestamp() != nil {
				deleting = append(deleting, name)
			} else {
				live = append(live, name)
			}
		}
	}
	return live, deleting, nil
}

// refuseDestroyMessage names what blocks the destroy and the ways on.
func refuseDestroyMessage(live []string) string {
	shown := live
	more := ""
	if len(shown) > 20 {
		shown, more = shown[:20], fmt.Sprintf(" and %d more", len(live)-20)
	}
	return fmt.Sprintf("The cluster still has %s%s. Destroying dovetail_controller deletes Dovetail's CRDs, and deleting a CRD deletes every object of its kind in the cluster, "+
		"including those this Terraform state does not manage; so nothing was deleted.\n\n"+
		"Destroy the dovetail_node_pool and dovetail_ec2_node_class resources that manage them first: Terraform does that by itself when they depend on this resource (depends_on = [dovetail_controller.this]). "+
		"Delete the others where they were made, or with kubectl delete nodepool NAME and kubectl delete ec2nodeclass NAME, and let the controller terminate their nodes. Then destroy again.",
		strings.Join(shown, ", "), more)
}

// nodeObjectsGone waits until no NodePool or EC2NodeClass is left.
func nodeObjectsGone(ctx context.Context, cl client.Client, timeout time.Duration) error {
	var left []string
	err := wait.PollUntilContextTimeout(ctx, time.Second, timeout, true, func(ctx context.Context) (bool, error) {
		live, deleting, err := nodeObjects(ctx, cl)
		if err != nil {
			return false, err
		}
		left = append(live, deleting...)
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("after %s these remain: %s. Is the Dovetail controller running? Its finalizers terminate the nodes and launch templates they hold, %w", timeout, strings.Join(left, ", "), err)
	}
	return nil
}

// liveNodeClaims are claims nothing is deleting: neither they nor their NodePool.
func liveNodeClaims(ctx context.Context, cl client.Client) []string {
	claims := &unstructured.UnstructuredList{}
	claims.SetGroupVersionKind(nodeClaimListGVK)
	if err := cl.List(ctx, claims); err != nil {
		return nil
	}
	var live []string
	for _, c := range claims.Items {
		if c.GetDeletionTimestamp() != nil {
			continue
		}
		pool := &unstructured.Unstructured{}
		pool.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodePool"})
		err := cl.Get(ctx, client.ObjectKey{Name: c.GetLabels()["karpenter.sh/nodepool"]}, pool)
		if apierrors.IsNotFound(err) || (err == nil && pool.GetDeletionTimestamp() != nil) {
			continue
		}
		live = append(live, c.GetName())
	}
	return live
}

func (r *controllerResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	namespace, name, ok := strings.Cut(req.ID, "/")
	if !ok || namespace == "" || name == "" {
		resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: use namespace/name of the controller Deployment, such as dovetail/dovetail", req.ID))
		return
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
}

// goDuration checks a Go duration string such as 10s or 5m.
type goDuration struct{}

func (goDuration) Description(context.Context) string               { return "a duration such as 10s or 5m" }
func (v goDuration) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (goDuration) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if d, err := time.ParseDuration(req.ConfigValue.ValueString()); err != nil || d <= 0 {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid duration", fmt.Sprintf("%q is not a positive duration; write it like 10s, 5m or 1h30m", req.ConfigValue.ValueString()))
	}
}

// decimal checks a number from 0 to max written in decimal, such as a price.
type decimal struct {
	max     float64
	example string
}

func (d decimal) Description(context.Context) string {
	if math.IsInf(d.max, 1) {
		return "a decimal number of at least 0, such as " + d.example
	}
	return fmt.Sprintf("a decimal number from 0 to %g, such as %s", d.max, d.example)
}
func (d decimal) MarkdownDescription(ctx context.Context) string { return d.Description(ctx) }
func (d decimal) ValidateString(ctx context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if f, err := strconv.ParseFloat(req.ConfigValue.ValueString(), 64); err != nil || f < 0 || f > d.max || math.IsNaN(f) {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid number", fmt.Sprintf("%q is not %s", req.ConfigValue.ValueString(), d.Description(ctx)))
	}
}

// notImplementedGate refuses turning on a feature gate whose feature does not exist
// yet: the controller would refuse to start, so the plan says it first.
type notImplementedGate struct{ gate, feature string }

func (g notImplementedGate) Description(context.Context) string {
	return fmt.Sprintf("%s must be false: %s is not implemented yet", g.gate, g.feature)
}
func (g notImplementedGate) MarkdownDescription(ctx context.Context) string {
	return g.Description(ctx)
}
func (g notImplementedGate) ValidateMap(ctx context.Context, req validator.MapRequest, resp *validator.MapResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if v, ok := req.ConfigValue.Elements()[g.gate].(types.Bool); ok && v.ValueBool() {
		resp.Diagnostics.AddAttributeError(req.Path.AtMapKey(g.gate), "Feature not available",
			fmt.Sprintf("%s; remove %s from feature_gates or set it to false", g.Description(ctx), g.gate))
	}
}

// quantity checks a Kubernetes resource quantity such as 500m or 1Gi.
type quantity struct{}

func (quantity) Description(context.Context) string {
	return "a Kubernetes quantity such as 500m or 1Gi"
}
func (v quantity) MarkdownDescription(ctx context.Context) string { return v.Description(ctx) }
func (quantity) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := k8sresource.ParseQuantity(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid quantity", fmt.Sprintf("%q is not a Kubernetes quantity; write it like 500m, 1 or 1Gi", req.ConfigValue.ValueString()))
	}
}
