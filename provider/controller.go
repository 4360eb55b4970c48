package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"regexp"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework-validators/listvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/mapvalidator"
	"github.com/hashicorp/terraform-plugin-framework-validators/stringvalidator"
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
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

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
	RootVolumePricePerGiBMonth types.String   `tfsdk:"root_volume_price_per_gib_month"`
	PublicIPv4PricePerHour     types.String   `tfsdk:"public_ipv4_price_per_hour"`
	NodeOverheadPricePerHour   types.String   `tfsdk:"node_overhead_price_per_hour"`
	FewerNodesTolerance        types.String   `tfsdk:"fewer_nodes_tolerance"`
	WaitForRollout             types.Bool     `tfsdk:"wait_for_rollout"`
	KeepCRDsOnDestroy          types.Bool     `tfsdk:"keep_crds_on_destroy"`
	RolloutTimeout             types.String   `tfsdk:"rollout_timeout"`
	ManifestsSHA256            types.String   `tfsdk:"manifests_sha256"`
	Values                     types.List     `tfsdk:"values"`
	Timeouts                   timeouts.Value `tfsdk:"timeouts"`
}

func (r *controllerResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + "_controller"
}

func (r *controllerResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
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
			"name":             schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Name), PlanModifiers: replace, Validators: []validator.String{dnsName{}}, Description: "Name of the Deployment, Service, PDB and RBAC objects."},
			"namespace":        schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Namespace), PlanModifiers: replace, Validators: []validator.String{dnsName{}}, Description: "Namespace of the controller."},
			"create_namespace": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(true), PlanModifiers: []planmodifier.Bool{boolplanmodifier.RequiresReplace()}, Description: "Create the namespace (and delete it on destroy); false for an existing one such as kube-system."},
			"service_account":  schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.ServiceAccount), PlanModifiers: replace, Validators: []validator.String{dnsName{}}, Description: "ServiceAccount name; with EKS Pod Identity, the association (aws_eks_pod_identity_association) names this account and namespace."},
			"image":            imageAttribute(d.Image),
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
			"feature_gates": schema.MapAttribute{Optional: true, ElementType: types.BoolType, Description: "Feature gates, by Karpenter's names: SpotToSpotConsolidation, ReservedCapacity (on unless set false), NodeRepair, NodeOverlay, StaticCapacity and CapacityBuffer (off unless set true).",
				Validators: []validator.Map{mapvalidator.KeysAre(stringvalidator.OneOf("SpotToSpotConsolidation", "ReservedCapacity", "NodeRepair", "NodeOverlay", "StaticCapacity", "CapacityBuffer"))}},
			"log_level":           schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString(d.Settings.LogLevel), Description: "The controller's log level: debug, info or error.", Validators: []validator.String{stringvalidator.OneOf("debug", "info", "error")}},
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
			"keep_crds_on_destroy": schema.BoolAttribute{Optional: true, Computed: true, Default: booldefault.StaticBool(false),
				Description: "Destroy hands the cluster over instead of emptying it: it removes the controller and its objects but keeps the Karpenter CRDs, and with them every NodePool, EC2NodeClass, NodeClaim and node, " +
					"takes Dovetail's own annotations (dovetail.sh/*) off the NodeClaims and Nodes and Karpenter's class hash off the EC2NodeClasses (so Karpenter re-stamps the claims with its own), and deletes Dovetail's Commitment CRD when no Commitment is left. The controller's pods are gone before anything else is removed. For going back to Karpenter (docs/guides/rollback.md): " +
					"apply it set to true, then remove the resource; Karpenter's controller takes the nodes over where Dovetail left them. Whoever runs next must run soon: until then nothing provisions, consolidates or terminates."},
			"rollout_timeout": schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("5m"), Validators: duration,
				Description:        "How long a create or update may take, the rollout included, when the timeouts block does not say.",
				DeprecationMessage: "Use timeouts { create = \"5m\", update = \"5m\" }, as in other providers; rollout_timeout is only their default now."},
			"values": schema.ListAttribute{Optional: true, ElementType: types.StringType, Validators: []validator.List{listvalidator.ValueStringsAre(chartValuesDocument{})},
				Description: "Further values of the Helm chart the manifests come from (charts/dovetail, named like Karpenter's chart: tolerations, nodeSelector, affinity, topologySpreadConstraints, priorityClassName, podAnnotations, controller.env, serviceMonitor, ...), " +
					"as YAML documents like helm_release's values (write them with yamlencode); later documents win. What the attributes above set (replicas, image, settings.clusterName, ...) is set there, not here: the plan fails naming the attribute; Karpenter's settings no attribute sets (settings.vmMemoryOverheadPercent, settings.reservedENIs, ...) go here. The chart renders at plan time, so its schema and refusals fail the plan."},
			"manifests_sha256": schema.StringAttribute{Computed: true, Description: "Digest of the applied manifests. When the objects in the cluster differ from them (say, after kubectl edit or scale), refresh records what drifted here and the plan applies them again."},
		},
		Blocks: map[string]schema.Block{"timeouts": timeouts.Block(ctx, timeouts.Opts{Create: true, Update: true, Delete: true})},
	}
}

// imageAttribute defaults to the image released with this provider. A provider built
// from source has none (its description must not say so: the docs are generated from a
// build from source), and ValidateConfig asks for it.
func imageAttribute(released string) schema.StringAttribute {
	a := schema.StringAttribute{Optional: true, Computed: true,
		Description: "Controller image; a private cluster mirrors it into ECR. Default: the image released with this provider, " + templates.ImageRepository + ":v<the provider's version>. " +
			"A provider built from source is no release and has no default: set the image you built from the repository's Dockerfile."}
	if released != "" {
		a.Default = stringdefault.StaticString(released)
	}
	return a
}

// ValidateConfig asks a provider built from source for the image it has no default for.
func (r *controllerResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	if templates.DefaultImage != "" {
		return
	}
	var image types.String
	resp.Diagnostics.Append(req.Config.GetAttribute(ctx, path.Root("image"), &image)...)
	if image.IsNull() {
		resp.Diagnostics.AddAttributeError(path.Root("image"), "image is required", "Set image on dovetail_controller (controller.image in modules/dovetail): "+templates.NoImage+".")
	}
}

var clusterNameValidator = stringvalidator.RegexMatches(regexp.MustCompile(`^[0-9A-Za-z][A-Za-z0-9\-_]{0,99}$`), "must be an EKS cluster name: 1-100 letters, digits, - and _, starting with a letter or digit")

func (r *controllerResource) values(m *controllerModel) (templates.Values, error) {
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
	extra, err := chartValues(m.Values)
	v.ExtraChartValues = extra
	return v, err
}

// rolloutAnnotation records wait_for_rollout, rollout_timeout and the timeouts block
// on the Deployment.
const rolloutAnnotation = "dovetail.sh/terraform-rollout"

// render is everything applied, CRDs first, and the digest the plan shows.
func (r *controllerResource) render(m *controllerModel) ([]*unstructured.Unstructured, string, error) {
	crds, err := templates.CRDObjects()
	if err != nil {
		return nil, "", err
	}
	v, err := r.values(m)
	if err != nil {
		return nil, "", err
	}
	objs, err := templates.Manifests(v)
	if err != nil {
		return nil, "", err
	}
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			// How Terraform waits for the rollout lives nowhere else in the
			// cluster: recorded on the Deployment, an import reads it back.
			ann := o.GetAnnotations()
			if ann == nil {
				ann = map[string]string{}
			}
			ann[rolloutAnnotation] = fmt.Sprintf("wait=%t,timeout=%s", m.WaitForRollout.ValueBool(), m.RolloutTimeout.ValueString()) + timeoutsAnnotation(m.Timeouts)
			o.SetAnnotations(ann)
		}
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
	known, diags := renderInputsKnown(ctx, req.Plan, plan)
	resp.Diagnostics.Append(diags...)
	if !known {
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

// renderInputsKnown reports whether every attribute the manifests come from is known.
// The computed id and digest are unknown in the plan of any create or change, which
// is exactly when the chart must check the values, so they do not count.
func renderInputsKnown(ctx context.Context, probe tfsdk.Plan, m controllerModel) (bool, diag.Diagnostics) {
	m.ID, m.ManifestsSHA256 = types.StringValue(""), types.StringValue("")
	diags := probe.Set(ctx, &m)
	return !diags.HasError() && probe.Raw.IsFullyKnown(), diags
}

func (r *controllerResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	r.install(ctx, req.Plan, &resp.State, opCreate, &resp.Diagnostics)
}

func (r *controllerResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	r.install(ctx, req.Plan, &resp.State, opUpdate, &resp.Diagnostics)
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
