package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"

	"github.com/hashicorp/terraform-plugin-framework-validators/int64validator"
	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource/schema"
	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ktypes "k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/controller/capacitymix"
)

// A NodePool's capacity_mix is its spot/on-demand mix, typed: the provider
// writes it as the two dovetail.sh annotations the controller reads (not a
// karpenter.sh field, which a Karpenter install would prune).

// mixFields are the capacity_mix attributes by the annotation each writes.
var mixFields = map[string]string{
	capacitymix.OnDemandBaseAnnotationKey: "on_demand_base",
	capacitymix.SpotPercentAnnotationKey:  "spot_percent",
}

var mixAttrTypes = map[string]attr.Type{"on_demand_base": types.Int64Type, "spot_percent": types.Int64Type}

// nodePoolModel is dovetail_node_pool's model: a kind with planned_impact, and
// its capacity_mix.
type nodePoolModel struct {
	impactModel
	CapacityMix types.Object `tfsdk:"capacity_mix"`
}

func capacityMixAttribute() schema.Attribute {
	return schema.SingleNestedAttribute{
		Optional: true,
		Description: "The pool's spot/on-demand mix, as EC2 Auto Scaling states one: the first `on_demand_base` nodes on-demand, and of the nodes beyond them at most `spot_percent` percent spot. " +
			"Every launch holds it (a node that could be spot is launched on-demand when one more spot node would break it), consolidation and drift never break it, and interrupted spot nodes are replaced within it. " +
			"Written as the annotations dovetail.sh/on-demand-base and dovetail.sh/spot-percent (a Karpenter install leaves them alone); set it here or in `annotations`, not both. Changing it replaces no node.",
		Attributes: map[string]schema.Attribute{
			"on_demand_base": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.AtLeast(0)},
				Description: "How many of the pool's nodes, first, are on-demand (reserved capacity counts as on-demand). At most `spec.limits.nodes`. Default 0."},
			"spot_percent": schema.Int64Attribute{Optional: true, Validators: []validator.Int64{int64validator.Between(0, 100)},
				Description: "The most of the nodes beyond the base that may be spot, in percent (0 to 100; rounded down to whole nodes). Default 100."},
		},
	}
}

// mixFromModel is capacity_mix's values by attribute.
func mixFromModel(mix types.Object) map[string]types.Int64 {
	out := map[string]types.Int64{}
	for name, v := range mix.Attributes() {
		out[name], _ = v.(types.Int64)
	}
	return out
}

// mixAnnotations are the annotations capacity_mix writes; false while a value
// is unknown.
func mixAnnotations(mix types.Object) (map[string]string, bool) {
	if mix.IsNull() {
		return nil, true
	}
	if mix.IsUnknown() {
		return nil, false
	}
	out := map[string]string{}
	values := mixFromModel(mix)
	for key, name := range mixFields {
		v := values[name]
		if v.IsUnknown() {
			return nil, false
		}
		if !v.IsNull() {
			out[key] = strconv.FormatInt(v.ValueInt64(), 10)
		}
	}
	return out, true
}

// mixFromAnnotations is capacity_mix as the object's annotations state it, or
// null when they state none, and the annotations whose values do not parse. The
// controller ignores a pool's whole mix when one does not parse; such a value
// reads as -1, which no configuration holds, so the plan writes the configured
// mix again.
func mixFromAnnotations(annotations map[string]string) (types.Object, []string) {
	values := map[string]attr.Value{}
	set := false
	var bad []string
	for _, key := range slices.Sorted(maps.Keys(mixFields)) {
		name := mixFields[key]
		values[name] = types.Int64Null()
		s, ok := annotations[key]
		if !ok {
			continue
		}
		set = true
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			n = -1
			bad = append(bad, key)
		}
		values[name] = types.Int64Value(n)
	}
	if !set {
		return types.ObjectNull(mixAttrTypes), nil
	}
	return types.ObjectValueMust(mixAttrTypes, values), bad
}

// readMix is capacity_mix as the live object states it, warning about a value
// that does not parse.
func readMix(annotations map[string]string, diags *diag.Diagnostics) types.Object {
	mix, bad := mixFromAnnotations(annotations)
	for _, key := range bad {
		diags.AddAttributeWarning(path.Root("capacity_mix").AtName(mixFields[key]), "Capacity mix annotation does not parse",
			fmt.Sprintf("The NodePool's annotation %s=%q is not a whole number, so the controller ignores the pool's capacity mix. It reads here as -1; the next apply writes capacity_mix again.", key, annotations[key]))
	}
	return mix
}

// controllerAnnotations are the annotations the model writes: its annotations
// and, for a NodePool, those of capacity_mix; false while some are unknown.
func (r *customResource) controllerAnnotations(ctx context.Context, m customResourceModel) (map[string]string, bool) {
	if m.Annotations.IsUnknown() {
		return nil, false
	}
	for _, v := range m.Annotations.Elements() {
		if v.IsUnknown() {
			return nil, false
		}
	}
	out := mapStrings(m.Annotations)
	if !r.capacityMix {
		return out, true
	}
	mix, known := mixAnnotations(m.capacityMix)
	if !known {
		return nil, false
	}
	if len(mix) > 0 && out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, mix)
	return out, true
}

// checkMix refuses a capacity_mix that states nothing, and a mix annotation set
// in annotations beside capacity_mix: two places for one setting, one silently
// winning.
func (r *customResource) checkMix(m customResourceModel, diags *diag.Diagnostics) {
	if !r.capacityMix || m.capacityMix.IsNull() || m.capacityMix.IsUnknown() {
		return
	}
	if mix := mixFromModel(m.capacityMix); mix["on_demand_base"].IsNull() && mix["spot_percent"].IsNull() {
		diags.AddAttributeError(path.Root("capacity_mix"), "Empty capacity mix",
			"capacity_mix states neither on_demand_base nor spot_percent: set one (or both), or remove capacity_mix.")
	}
	if m.Annotations.IsNull() || m.Annotations.IsUnknown() {
		return
	}
	for key, name := range mixFields {
		if _, ok := m.Annotations.Elements()[key]; ok {
			diags.AddAttributeError(path.Root("annotations").AtMapKey(key), "Capacity mix set twice",
				"annotations[\""+key+"\"] is what capacity_mix."+name+" writes: remove it from annotations and set capacity_mix."+name+" (or remove capacity_mix).")
		}
	}
}

// annotationPath is the attribute a problem with an annotation the model writes
// is reported on: capacity_mix's field where the mix comes from there.
func (r *customResource) annotationPath(m customResourceModel, key string) path.Path {
	if name, ok := mixFields[key]; ok && r.capacityMix && !m.capacityMix.IsNull() {
		return path.Root("capacity_mix").AtName(name)
	}
	return path.Root("annotations").AtMapKey(key)
}

// ownsMix reports whether capacity_mix is set in the plan or was in the prior
// state: it then owns both mix annotations, whoever set them.
func (r *customResource) ownsMix(plan, prior customResourceModel) bool {
	return r.capacityMix && (!plan.capacityMix.IsNull() || !prior.capacityMix.IsNull())
}

// removedMixKeys are the mix annotations an apply of the plan over the prior
// state takes off: where capacity_mix owns them, every one the plan does not
// write; else those the prior annotations wrote and the plan does not (server-
// side apply removes what it owned).
func (r *customResource) removedMixKeys(ctx context.Context, plan, prior customResourceModel) []string {
	after, _ := r.controllerAnnotations(ctx, plan)
	before, _ := r.controllerAnnotations(ctx, prior)
	var out []string
	for _, key := range slices.Sorted(maps.Keys(mixFields)) {
		if _, writes := after[key]; writes {
			continue
		}
		if _, wrote := before[key]; wrote || r.ownsMix(plan, prior) {
			out = append(out, key)
		}
	}
	return out
}

// dropStaleMix removes, after an apply, the mix annotations capacity_mix owns
// and the plan does not write that another manager (kubectl annotate, or the
// tool that made an imported pool) left: the controller reads the two as one
// setting, so with capacity_mix set, or just removed, none is left behind.
func (r *customResource) dropStaleMix(ctx context.Context, cl client.Client, plan, prior customResourceModel, applied map[string]string, live *unstructured.Unstructured) error {
	if !r.ownsMix(plan, prior) {
		return nil
	}
	remove := map[string]any{}
	for key := range mixFields {
		if _, want := applied[key]; !want {
			if _, has := live.GetAnnotations()[key]; has {
				remove[key] = nil
			}
		}
	}
	if len(remove) == 0 {
		return nil
	}
	raw, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": remove}})
	if err != nil {
		return err
	}
	return cl.Patch(ctx, live, client.RawPatch(ktypes.MergePatchType, raw), client.FieldOwner(FieldManager))
}
