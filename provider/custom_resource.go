package provider

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/terraform-plugin-framework-timeouts/resource/timeouts"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/planmodifier"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringdefault"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema/stringplanmodifier"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/tfsdk"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/simulate"
	"github.com/dovetail-sh/dovetail/provider/crdschema"
	"github.com/dovetail-sh/dovetail/templates/crds"
)

// FieldManager owns what the provider applies with server-side apply.
const FieldManager = "terraform-provider-dovetail"

// kinds are Dovetail's CRDs, read once: the provider's schema is the cluster's schema.
var kinds = sync.OnceValues(func() (map[string]*crdschema.Kind, error) {
	crds, err := crds.CRDs()
	if err != nil {
		return nil, err
	}
	out := map[string]*crdschema.Kind{}
	for _, crd := range crds {
		k, err := crdschema.Load(crd)
		if err != nil {
			return nil, err
		}
		out[k.GVK.Kind] = k
	}
	return out, nil
})

// customResource is a cluster-scoped custom resource whose spec is typed HCL: the
// NodePool and EC2NodeClass resources.
type customResource struct {
	withClients
	kindName    string
	typeSuffix  string
	description string
	// extraChecks are checks the controller makes beyond the CRD's, so plans fail
	// where the controller would refuse the object later.
	extraChecks func(spec map[string]any) field.ErrorList
	// annotationChecks check the annotations the controller reads (with the spec
	// they depend on): each problem by annotation key, reported on it at plan.
	annotationChecks func(annotations map[string]string, spec map[string]any) map[string]string
	// afterDelete waits for what the object's deletion sets off, such as a NodePool's
	// nodes terminating.
	afterDelete func(ctx context.Context, cl client.Client, name string) error
	// namespaced kinds have a namespace attribute, and import IDs namespace/name.
	namespaced bool
	// impact kinds (NodePool, EC2NodeClass) have a planned_impact attribute: what
	// an update does to the live fleet, worked out at plan.
	impact func(obj map[string]any) (simulate.Change, error)
	// capacityMix kinds (NodePool) have a capacity_mix attribute, written as
	// annotations (node_pool_capacity_mix.go). They have an impact too.
	capacityMix bool
}

// impactModel is the model of a kind with planned_impact.
type impactModel struct {
	customResourceModel
	PlannedImpact types.String `tfsdk:"planned_impact"`
}

// namespacedModel is the model of a namespaced kind.
type namespacedModel struct {
	customResourceModel
	Namespace types.String `tfsdk:"namespace"`
}

type modelSource interface {
	Get(ctx context.Context, target any) diag.Diagnostics
}

// model reads the plan, state or configuration, with the namespace of a
// namespaced kind ("" for a cluster-scoped one).
func (r *customResource) model(ctx context.Context, src modelSource, diags *diag.Diagnostics) (customResourceModel, string) {
	if r.capacityMix {
		var m nodePoolModel
		diags.Append(src.Get(ctx, &m)...)
		m.customResourceModel.plannedImpact, m.customResourceModel.capacityMix = m.PlannedImpact, m.CapacityMix
		return m.customResourceModel, ""
	}
	if r.impact != nil {
		var m impactModel
		diags.Append(src.Get(ctx, &m)...)
		m.customResourceModel.plannedImpact = m.PlannedImpact
		return m.customResourceModel, ""
	}
	if !r.namespaced {
		var m customResourceModel
		diags.Append(src.Get(ctx, &m)...)
		return m, ""
	}
	var m namespacedModel
	diags.Append(src.Get(ctx, &m)...)
	return m.customResourceModel, m.Namespace.ValueString()
}

// setState writes the model, with the namespace of a namespaced kind.
func (r *customResource) setState(ctx context.Context, st *tfsdk.State, m customResourceModel, namespace string) diag.Diagnostics {
	if r.impact != nil {
		impact := m.plannedImpact
		if impact.IsNull() || impact.IsUnknown() {
			impact = types.StringValue("")
		}
		if r.capacityMix {
			mix := m.capacityMix
			if mix.IsNull() || mix.IsUnknown() {
				mix = types.ObjectNull(mixAttrTypes)
			}
			return st.Set(ctx, &nodePoolModel{impactModel: impactModel{customResourceModel: m, PlannedImpact: impact}, CapacityMix: mix})
		}
		return st.Set(ctx, &impactModel{customResourceModel: m, PlannedImpact: impact})
	}
	if !r.namespaced {
		return st.Set(ctx, &m)
	}
	return st.Set(ctx, &namespacedModel{customResourceModel: m, Namespace: types.StringValue(namespace)})
}

// key is the object's key.
func key(namespace, name string) client.ObjectKey {
	return client.ObjectKey{Namespace: namespace, Name: name}
}

type customResourceModel struct {
	ID          types.String   `tfsdk:"id"`
	Name        types.String   `tfsdk:"name"`
	Labels      types.Map      `tfsdk:"labels"`
	Annotations types.Map      `tfsdk:"annotations"`
	Spec        types.Object   `tfsdk:"spec"`
	Status      types.Object   `tfsdk:"status"`
	Timeouts    timeouts.Value `tfsdk:"timeouts"`
	// plannedImpact carries planned_impact for the kinds that have it, and
	// capacityMix capacity_mix.
	plannedImpact types.String
	capacityMix   types.Object
}

func (r *customResource) kind(diags *diag.Diagnostics) *crdschema.Kind {
	all, err := kinds()
	if err != nil {
		diags.AddError("Cannot read Dovetail's CRDs", err.Error())
		return nil
	}
	return all[r.kindName]
}

func (r *customResource) Metadata(_ context.Context, req resource.MetadataRequest, resp *resource.MetadataResponse) {
	resp.TypeName = req.ProviderTypeName + r.typeSuffix
}

func (r *customResource) Schema(ctx context.Context, _ resource.SchemaRequest, resp *resource.SchemaResponse) {
	k := r.kind(&resp.Diagnostics)
	if k == nil {
		return
	}
	spec, err := crdschema.Attribute(k.Property("spec"), crdschema.Configurable, true)
	if err != nil {
		resp.Diagnostics.AddError("Cannot build the schema of "+r.kindName, err.Error())
		return
	}
	status, err := crdschema.Attribute(k.Property("status"), crdschema.Reported, false)
	if err != nil {
		resp.Diagnostics.AddError("Cannot build the schema of "+r.kindName, err.Error())
		return
	}
	attrs := map[string]schema.Attribute{
		"id": schema.StringAttribute{Computed: true, Description: "The object's name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}},
		"name": schema.StringAttribute{Required: true, Description: "metadata.name; changing it replaces the object.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:    []validator.String{dnsName{}}},
		"labels": schema.MapAttribute{Optional: true, ElementType: types.StringType,
			Description: "Labels of the object itself (not of its nodes). Only keys set here are managed; others, such as those the controller sets, are left alone."},
		"annotations": schema.MapAttribute{Optional: true, ElementType: types.StringType,
			Description: "Annotations of the object itself. Only keys set here are managed."},
		"spec":   spec,
		"status": status,
	}
	if r.capacityMix {
		attrs["capacity_mix"] = capacityMixAttribute()
	}
	if r.impact != nil {
		attrs["planned_impact"] = schema.StringAttribute{Computed: true,
			Description: "What the last update does to the fleet, worked out from the live cluster by the controller's own drift and planning code: " +
				"which NodeClaims drift and why, which are updated in place (template labels and annotations), how the disruption budgets pace the replacement (waves, estimated duration), and the affected nodes' $/h before and after (Commitments applied). " +
				"terraform plan shows it as a warning; this attribute is known after apply and records it as worked out just before the apply (the fleet may move between plan and apply). When the cluster cannot be reached it says so; the plan never fails for it."}
	}
	if r.namespaced {
		attrs["namespace"] = schema.StringAttribute{Optional: true, Computed: true, Default: stringdefault.StaticString("default"),
			Description:   "metadata.namespace (default \"default\"); changing it replaces the object.",
			PlanModifiers: []planmodifier.String{stringplanmodifier.RequiresReplace()},
			Validators:    []validator.String{dnsName{label: true}}}
		attrs["id"] = schema.StringAttribute{Computed: true, Description: "namespace/name.", PlanModifiers: []planmodifier.String{stringplanmodifier.UseStateForUnknown()}}
	}
	resp.Schema = schema.Schema{
		Description: r.description,
		Attributes:  attrs,
		Blocks: map[string]schema.Block{
			"timeouts": timeouts.Block(ctx, timeouts.Opts{Delete: true}),
		},
	}
}

func (r *customResource) ValidateConfig(ctx context.Context, req resource.ValidateConfigRequest, resp *resource.ValidateConfigResponse) {
	cfg, _ := r.model(ctx, req.Config, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || cfg.Name.IsUnknown() {
		return
	}
	r.validate(ctx, cfg.Name.ValueString(), cfg.Spec, types.ObjectNull(nil), &resp.Diagnostics)
	r.checkMix(cfg, &resp.Diagnostics)
	r.checkAnnotations(ctx, cfg, &resp.Diagnostics)
}

// checkAnnotations runs annotationChecks on the known annotations the model
// writes and its spec.
func (r *customResource) checkAnnotations(ctx context.Context, m customResourceModel, diags *diag.Diagnostics) {
	if r.annotationChecks == nil {
		return
	}
	values, known := r.controllerAnnotations(ctx, m)
	if !known || len(values) == 0 {
		return
	}
	k := r.kind(diags)
	if k == nil {
		return
	}
	spec, err := r.specJSON(ctx, k, m.Spec)
	if err != nil {
		return
	}
	obj := k.Object("x", spec)
	k.Default(obj)
	s, _ := obj["spec"].(map[string]any)
	problems := r.annotationChecks(values, s)
	keys := make([]string, 0, len(problems))
	for key := range problems {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	for _, key := range keys {
		p := r.annotationPath(m, key)
		diags.AddAttributeError(p, "Invalid "+p.String(), problems[key])
	}
}

// validate runs the API server's defaulting and validation on a spec, reporting each
// problem on its attribute. With an old spec it reports only what the change breaks
// (transition rules such as immutable fields). Unknown values are checked at apply.
func (r *customResource) validate(ctx context.Context, name string, specValue, oldValue types.Object, diags *diag.Diagnostics) {
	k := r.kind(diags)
	if k == nil {
		return
	}
	spec, err := r.specJSON(ctx, k, specValue)
	if errors.Is(err, crdschema.ErrUnknown) {
		return
	} else if err != nil {
		diags.AddError("Cannot read spec", err.Error())
		return
	}
	obj := k.Object(name, spec)
	k.Default(obj)
	errs := k.Validate(ctx, obj, nil)
	if r.extraChecks != nil {
		if s, ok := obj["spec"].(map[string]any); ok {
			errs = append(errs, r.extraChecks(s)...)
		}
	}
	if !oldValue.IsNull() && !oldValue.IsUnknown() {
		old, err := r.specJSON(ctx, k, oldValue)
		if err != nil {
			return
		}
		oldObj := k.Object(name, old)
		k.Default(oldObj)
		seen := map[string]bool{}
		for _, e := range errs {
			seen[e.Error()] = true
		}
		errs = nil
		for _, e := range k.Validate(ctx, obj, oldObj) {
			if !seen[e.Error()] {
				errs = append(errs, e)
			}
		}
	}
	for _, e := range errs {
		p, s := crdschema.AttributePath(path.Empty(), k.Root, e.Field)
		if strings.HasPrefix(e.Field, "metadata") {
			p = path.Root("name")
		}
		detail := fmt.Sprintf("The %s %s CRD refuses %s: %s", k.GVK.GroupVersion(), k.GVK.Kind, p, e.ErrorBody())
		if desc := strings.TrimSpace(s.Generic.Description); desc != "" && p.String() != "spec" {
			detail += "\n\n" + p.String() + ": " + desc
		}
		diags.AddAttributeError(p, "Invalid "+p.String(), detail)
	}
}

func (r *customResource) specJSON(ctx context.Context, k *crdschema.Kind, v types.Object) (map[string]any, error) {
	if v.IsUnknown() {
		return nil, crdschema.ErrUnknown
	}
	if v.IsNull() {
		return nil, nil
	}
	tv, err := v.ToTerraformValue(ctx)
	if err != nil {
		return nil, err
	}
	x, err := crdschema.ToUnstructured(tv, k.Property("spec"))
	if err != nil {
		return nil, err
	}
	spec, _ := x.(map[string]any)
	return spec, nil
}

func (r *customResource) ModifyPlan(ctx context.Context, req resource.ModifyPlanRequest, resp *resource.ModifyPlanResponse) {
	if req.Plan.Raw.IsNull() {
		return
	}
	requireKubernetes(r.clients, "dovetail"+r.typeSuffix, &resp.Diagnostics)
	if req.State.Raw.IsNull() {
		if r.impact != nil {
			// A new object has no nodes to change yet.
			resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_impact"), types.StringValue(""))...)
		}
		return
	}
	plan, _ := r.model(ctx, req.Plan, &resp.Diagnostics)
	state, _ := r.model(ctx, req.State, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || plan.Name.ValueString() != state.Name.ValueString() {
		return
	}
	r.validate(ctx, plan.Name.ValueString(), plan.Spec, state.Spec, &resp.Diagnostics)
	if r.impact != nil && !resp.Diagnostics.HasError() {
		r.planImpact(ctx, plan, state, resp)
	}
}

func (r *customResource) Create(ctx context.Context, req resource.CreateRequest, resp *resource.CreateResponse) {
	plan, namespace := r.model(ctx, req.Plan, &resp.Diagnostics)
	if resp.Diagnostics.HasError() || r.refuseExisting(ctx, namespace, plan.Name.ValueString(), &resp.Diagnostics) {
		return
	}
	r.applyPlan(ctx, req.Plan, customResourceModel{}, &resp.State, &resp.Diagnostics)
}

// refuseExisting fails the create of an object another state or kubectl already
// made: server-side apply would silently take it over and rewrite its spec.
func (r *customResource) refuseExisting(ctx context.Context, namespace, name string, diags *diag.Diagnostics) bool {
	k := r.kind(diags)
	cl := kubeClient(r.clients, diags)
	if k == nil || cl == nil {
		return true
	}
	live := &unstructured.Unstructured{}
	live.SetGroupVersionKind(k.GVK)
	err := cl.Get(ctx, key(namespace, name), live)
	id := name
	if r.namespaced {
		id = namespace + "/" + name
	}
	switch {
	case err == nil:
		diags.AddAttributeError(path.Root("name"), fmt.Sprintf("%s %s already exists", k.GVK.Kind, id),
			fmt.Sprintf("The cluster already has %s %q, made outside this configuration (another Terraform state, kubectl or Helm). Creating it here would take it over and rewrite it. "+
				"To manage it here, import it: terraform import dovetail%s.<name> %s. Otherwise choose another name.", k.GVK.Kind, id, r.typeSuffix, id))
		return true
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
		// Not there (or no CRD yet, which the apply explains).
		return false
	default:
		diags.AddError(fmt.Sprintf("Cannot check whether %s %s exists", k.GVK.Kind, name), err.Error())
		return true
	}
}

func (r *customResource) Update(ctx context.Context, req resource.UpdateRequest, resp *resource.UpdateResponse) {
	prior, _ := r.model(ctx, req.State, &resp.Diagnostics)
	r.applyPlan(ctx, req.Plan, prior, &resp.State, &resp.Diagnostics)
}

// applyPlan applies the plan over the prior state (empty on create).
func (r *customResource) applyPlan(ctx context.Context, planned tfsdk.Plan, prior customResourceModel, state *tfsdk.State, diags *diag.Diagnostics) {
	plan, namespace := r.model(ctx, planned, diags)
	if diags.HasError() {
		return
	}
	if r.impact != nil && plan.plannedImpact.IsUnknown() {
		// What this apply does to the fleet, from the cluster as it is now.
		plan.plannedImpact = types.StringValue(r.impactText(ctx, plan.Name.ValueString(), plan, prior))
	}
	r.apply(ctx, planned.Schema, &plan, prior, namespace, diags)
	if !diags.HasError() {
		diags.Append(r.setState(ctx, state, plan, namespace)...)
	}
}

// apply server-side applies the planned object and checks that the cluster now holds
// exactly the planned spec. Fields another manager added (say, with kubectl edit) are
// not removed by an apply that omits them, so the spec is then replaced outright.
func (r *customResource) apply(ctx context.Context, sch typedSchema, plan *customResourceModel, prior customResourceModel, namespace string, diags *diag.Diagnostics) {
	k := r.kind(diags)
	cl := kubeClient(r.clients, diags)
	if k == nil || cl == nil {
		return
	}
	spec, err := r.specJSON(ctx, k, plan.Spec)
	if err != nil {
		diags.AddError("Cannot read spec", err.Error())
		return
	}
	name := plan.Name.ValueString()
	u := &unstructured.Unstructured{Object: k.Object(name, spec)}
	u.SetNamespace(namespace)
	u.SetLabels(mapStrings(plan.Labels))
	annotations, _ := r.controllerAnnotations(ctx, *plan)
	u.SetAnnotations(annotations)
	if err := cl.Patch(ctx, u, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager)); err != nil {
		diags.AddError(fmt.Sprintf("Cannot apply %s %s", k.GVK.Kind, name), r.explain(k, err))
		return
	}
	if err := r.dropStaleMix(ctx, cl, *plan, prior, annotations, u); err != nil {
		diags.AddError(fmt.Sprintf("Cannot remove the capacity mix annotations of %s %s that capacity_mix does not set", k.GVK.Kind, name), err.Error())
		return
	}
	got, d := valueAt(ctx, sch, k, "spec", u.Object["spec"])
	diags.Append(d...)
	if diags.HasError() {
		return
	}
	if !got.Equal(plan.Spec) {
		u.Object["spec"] = spec
		if err := cl.Update(ctx, u, client.FieldOwner(FieldManager)); err != nil {
			diags.AddError(fmt.Sprintf("Cannot replace the spec of %s %s", k.GVK.Kind, name), r.explain(k, err))
			return
		}
		if got, d = valueAt(ctx, sch, k, "spec", u.Object["spec"]); !got.Equal(plan.Spec) {
			diags.Append(d...)
			diags.AddError(fmt.Sprintf("%s %s does not hold the planned spec", k.GVK.Kind, name),
				fmt.Sprintf("After applying, the cluster holds\n%s\nbut the plan was\n%s\nSomething in the cluster (a mutating webhook?) changes the object.", got, plan.Spec))
			return
		}
	}
	plan.ID = plan.Name
	if r.namespaced {
		plan.ID = types.StringValue(namespace + "/" + name)
	}
	status, d := valueAt(ctx, sch, k, "status", u.Object["status"])
	diags.Append(d...)
	plan.Status = status
}

// explain turns the API server's refusals into what to do about them.
func (r *customResource) explain(k *crdschema.Kind, err error) string {
	if meta.IsNoMatchError(err) {
		return fmt.Sprintf("The cluster does not serve %s %s: its CRD is not installed. Install it with dovetail_controller (and add depends_on = [dovetail_controller.this] here) or apply the output of `dovetail render`.",
			k.GVK.GroupVersion(), k.GVK.Kind)
	}
	return err.Error()
}

// typedSchema is the part of the request's schema used to type values read back.
type typedSchema interface {
	TypeAtPath(context.Context, path.Path) (attr.Type, diag.Diagnostics)
}

// valueAt turns what the cluster holds for a top-level field (spec or status) into
// that attribute's Terraform value, typed by the schema Terraform already has.
func valueAt(ctx context.Context, sch typedSchema, k *crdschema.Kind, field string, x any) (types.Object, diag.Diagnostics) {
	typ, diags := sch.TypeAtPath(ctx, path.Root(field))
	if diags.HasError() {
		return types.ObjectNull(nil), diags
	}
	tv, err := crdschema.FromUnstructured(x, k.Property(field), typ.TerraformType(ctx))
	if err != nil {
		diags.AddError("Cannot read the object from the cluster", err.Error())
		return types.ObjectNull(nil), diags
	}
	v, err := typ.ValueFromTerraform(ctx, tv)
	if err != nil {
		diags.AddError("Cannot read the object from the cluster", err.Error())
		return types.ObjectNull(nil), diags
	}
	obj, ok := v.(types.Object)
	if !ok {
		diags.AddError("Cannot read the object from the cluster", fmt.Sprintf("%s is %T, not an object", field, v))
	}
	return obj, diags
}

// fromState reads the state and gives the kind, a client and an empty object of the kind.
func (r *customResource) fromState(ctx context.Context, st tfsdk.State, diags *diag.Diagnostics) (customResourceModel, string, *crdschema.Kind, client.Client, *unstructured.Unstructured) {
	state, namespace := r.model(ctx, st, diags)
	k := r.kind(diags)
	cl := kubeClient(r.clients, diags)
	u := &unstructured.Unstructured{}
	if k != nil {
		u.SetGroupVersionKind(k.GVK)
	}
	return state, namespace, k, cl, u
}

func (r *customResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	state, namespace, k, cl, u := r.fromState(ctx, req.State, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	err := cl.Get(ctx, key(namespace, state.Name.ValueString()), u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		resp.State.RemoveResource(ctx)
		return
	}
	if err != nil {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot read %s %s", k.GVK.Kind, state.Name.ValueString()), err.Error())
		return
	}
	var d diag.Diagnostics
	state.ID = types.StringValue(u.GetName())
	if r.namespaced {
		state.ID = types.StringValue(u.GetNamespace() + "/" + u.GetName())
	}
	state.Spec, d = valueAt(ctx, req.State.Schema, k, "spec", u.Object["spec"])
	resp.Diagnostics.Append(d...)
	state.Status, d = valueAt(ctx, req.State.Schema, k, "status", u.Object["status"])
	resp.Diagnostics.Append(d...)
	if imported, _ := req.Private.GetKey(ctx, importedKey); len(imported) > 0 {
		// Which keys the configuration sets is not known at import: take the
		// object's own, leaving out what controllers and tools write on it.
		state.Labels, state.Annotations = ownKeys(u.GetLabels()), ownKeys(u.GetAnnotations())
		if r.capacityMix {
			state.capacityMix = readMix(u.GetAnnotations(), &resp.Diagnostics)
		}
		resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, nil)...)
	} else if r.capacityMix && !state.capacityMix.IsNull() {
		// Edited in the cluster (kubectl annotate): the plan puts it back.
		state.capacityMix = readMix(u.GetAnnotations(), &resp.Diagnostics)
	}
	state.Labels = managedKeys(state.Labels, u.GetLabels())
	state.Annotations = managedKeys(state.Annotations, u.GetAnnotations())
	resp.Diagnostics.Append(r.setState(ctx, &resp.State, state, namespace)...)
}

// importedKey marks, in private state, a resource just imported.
const importedKey = "imported"

// writtenByOthers are the prefixes of the labels and annotations that controllers
// and tools put on a NodePool or EC2NodeClass (the pool's hash, kubectl's last
// applied configuration): never a configuration's.
var writtenByOthers = []string{"karpenter.sh/", "karpenter.k8s.aws/", "kubectl.kubernetes.io/", "dovetail.sh/"}

// ownKeys are an object's labels or annotations a configuration may have set.
func ownKeys(m map[string]string) types.Map {
	out := map[string]attr.Value{}
	for k, v := range m {
		if !slices.ContainsFunc(writtenByOthers, func(p string) bool { return strings.HasPrefix(k, p) }) {
			out[k] = types.StringValue(v)
		}
	}
	if len(out) == 0 {
		return types.MapNull(types.StringType)
	}
	return types.MapValueMust(types.StringType, out)
}

// managedKeys keeps the live values of the keys Terraform set; a key removed in the
// cluster disappears, so the plan puts it back.
func managedKeys(prior types.Map, live map[string]string) types.Map {
	if prior.IsNull() || prior.IsUnknown() {
		return prior
	}
	out := map[string]attr.Value{}
	for k := range prior.Elements() {
		if v, ok := live[k]; ok {
			out[k] = types.StringValue(v)
		}
	}
	return types.MapValueMust(types.StringType, out)
}

func (r *customResource) Delete(ctx context.Context, req resource.DeleteRequest, resp *resource.DeleteResponse) {
	state, namespace, k, cl, u := r.fromState(ctx, req.State, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	u.SetName(state.Name.ValueString())
	u.SetNamespace(namespace)
	if err := cl.Delete(ctx, u); err != nil && !apierrors.IsNotFound(err) && !meta.IsNoMatchError(err) {
		resp.Diagnostics.AddError(fmt.Sprintf("Cannot delete %s %s", k.GVK.Kind, u.GetName()), err.Error())
		return
	}
	// A NodePool's nodes and an EC2NodeClass's launch templates go before the object
	// does (finalizers); returning earlier would let Terraform delete the IAM role or
	// the controller they still need.
	ctx, cancel, timeout := withOperationTimeout(ctx, state.Timeouts, opDelete, defaultDeleteTimeout, &resp.Diagnostics)
	defer cancel()
	var finalizers []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(k.GVK)
		err := cl.Get(ctx, key(u.GetNamespace(), u.GetName()), live)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return true, nil
		}
		if err == nil {
			finalizers = live.GetFinalizers()
		}
		return false, nil
	})
	if err != nil {
		sort.Strings(finalizers)
		resp.Diagnostics.AddError(fmt.Sprintf("%s %s is still terminating", k.GVK.Kind, u.GetName()),
			fmt.Sprintf("It still has finalizers %v %s. Is the Dovetail controller running? It removes them once the nodes are gone.", finalizers, timedOut(opDelete, timeout)))
		return
	}
	if r.afterDelete != nil {
		if err := r.afterDelete(ctx, cl, u.GetName()); err != nil {
			resp.Diagnostics.AddError(fmt.Sprintf("The nodes of %s %s are still terminating", k.GVK.Kind, u.GetName()), err.Error()+" "+timedOut(opDelete, timeout)+".")
		}
	}
}

// nodeClaimsGone waits until no NodeClaim matches the labels: deleting a NodePool
// deletes its NodeClaims, and their instances are terminated before they go.
// It waits until ctx's deadline.
func nodeClaimsGone(ctx context.Context, cl client.Client, labels client.MatchingLabels) error {
	var left []string
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
		claims := &unstructured.UnstructuredList{}
		claims.SetGroupVersionKind(nodeClaimListGVK)
		if err := cl.List(ctx, claims, labels); err != nil {
			return meta.IsNoMatchError(err), nil
		}
		left = left[:0]
		for _, c := range claims.Items {
			left = append(left, c.GetName())
		}
		return len(left) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("these NodeClaims remain: %v. Is the Dovetail controller running? It terminates their instances", left)
	}
	return nil
}

var nodeClaimListGVK = k8sschema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"}

func (r *customResource) ImportState(ctx context.Context, req resource.ImportStateRequest, resp *resource.ImportStateResponse) {
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("id"), req.ID)...)
	name := req.ID
	if r.namespaced {
		namespace, n, ok := strings.Cut(req.ID, "/")
		if !ok || namespace == "" || n == "" {
			resp.Diagnostics.AddError("Invalid import ID", fmt.Sprintf("%q: import a namespaced object by namespace/name, such as default/spare", req.ID))
			return
		}
		name = n
		resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("namespace"), namespace)...)
	}
	resp.Diagnostics.Append(resp.State.SetAttribute(ctx, path.Root("name"), name)...)
	resp.Diagnostics.Append(resp.Private.SetKey(ctx, importedKey, []byte("true"))...)
}

func mapStrings(m types.Map) map[string]string {
	if m.IsNull() || m.IsUnknown() {
		return nil
	}
	out := map[string]string{}
	for k, v := range m.Elements() {
		if s, ok := v.(types.String); ok {
			out[k] = s.ValueString()
		}
	}
	return out
}
