package provider

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/path"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/simulate"
)

// impactTimeout bounds reading the live cluster at plan: a plan waits no longer.
const impactTimeout = 30 * time.Second

// nodePoolChange and ec2NodeClassChange turn a planned object into the change
// the impact is worked out for.
func nodePoolChange(obj map[string]any) (simulate.Change, error) {
	np := &v1.NodePool{}
	return simulate.Change{NodePool: np}, fromUnstructured(obj, np)
}

func ec2NodeClassChange(obj map[string]any) (simulate.Change, error) {
	class := &awsv1.EC2NodeClass{}
	return simulate.Change{EC2NodeClass: class}, fromUnstructured(obj, class)
}

func fromUnstructured(obj map[string]any, into any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// planImpact shows a changed spec's impact on the live cluster as a plan
// warning; planned_impact is then known after apply, when Update records the
// impact worked out just before it applies (a plan's known value must survive
// the re-plan at apply, and the fleet moves in between). An unchanged spec keeps
// the last impact. Nothing here fails the plan.
func (r *customResource) planImpact(ctx context.Context, plan, state customResourceModel, resp *resource.ModifyPlanResponse) {
	if plan.Spec.Equal(state.Spec) && !r.mixChanged(ctx, plan, state) {
		prior := state.plannedImpact
		if prior.IsNull() || prior.IsUnknown() {
			prior = types.StringValue("")
		}
		resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_impact"), prior)...)
		return
	}
	name := plan.Name.ValueString()
	resp.Diagnostics.Append(resp.Plan.SetAttribute(ctx, path.Root("planned_impact"), types.StringUnknown())...)
	resp.Diagnostics.AddWarning(fmt.Sprintf("Planned impact of changing %s %s", r.kindName, name), r.impactText(ctx, name, plan, state))
}

// mixChanged reports whether the capacity mix the plan writes differs from the
// state's (or is not known yet).
func (r *customResource) mixChanged(ctx context.Context, plan, state customResourceModel) bool {
	if !r.capacityMix {
		return false
	}
	after, known := r.controllerAnnotations(ctx, plan)
	before, _ := r.controllerAnnotations(ctx, state)
	if !known {
		return true
	}
	for key := range mixFields {
		if after[key] != before[key] {
			return true
		}
	}
	return false
}

// impactText is the impact of applying the plan over the prior state now, or
// why it is not known.
func (r *customResource) impactText(ctx context.Context, name string, plan, prior customResourceModel) string {
	text, err := r.workOutImpact(ctx, name, plan, prior)
	if err != nil {
		return "Not worked out: " + err.Error()
	}
	return text
}

func (r *customResource) workOutImpact(ctx context.Context, name string, plan, prior customResourceModel) (string, error) {
	var d diag.Diagnostics
	k := r.kind(&d)
	if k == nil {
		return "", fmt.Errorf("the CRDs could not be read")
	}
	spec, err := r.specJSON(ctx, k, plan.Spec)
	if err != nil {
		return "", fmt.Errorf("the spec has values known only after apply")
	}
	obj := k.Object(name, spec)
	k.Default(obj)
	// The annotations the controller reads (the capacity mix) are the plan's;
	// while some are known only after apply, the cluster's.
	var notes []string
	annotations, known := r.controllerAnnotations(ctx, plan)
	if !known {
		notes = append(notes, "annotations known only after apply: the cluster's are used")
	} else if len(annotations) > 0 {
		if err := unstructured.SetNestedStringMap(obj, annotations, "metadata", "annotations"); err != nil {
			return "", err
		}
	}
	change, err := r.impact(obj)
	if err != nil {
		return "", fmt.Errorf("reading the planned %s, %w", r.kindName, err)
	}
	if known {
		change.RemovedAnnotations = r.removedMixKeys(ctx, plan, prior)
	}
	if r.clients == nil || r.clients.Kubernetes == nil {
		return "", fmt.Errorf("the provider has no kubernetes block")
	}
	cfg, err := r.clients.Kubernetes.Config()
	if err != nil {
		return "", fmt.Errorf("the cluster could not be reached (%v)", err)
	}
	// Every request, discovery included, gives up with the plan's patience.
	cfg = rest.CopyConfig(cfg)
	cfg.Timeout = impactTimeout
	ctx, cancel := context.WithTimeout(ctx, impactTimeout)
	defer cancel()
	in := &simulate.Inputs{}
	if err := simulate.ReadLive(ctx, cfg, in); err != nil {
		return "", fmt.Errorf("the cluster could not be read (%v)", err)
	}
	cat, err := catalog.EmbeddedAWS()
	if err != nil {
		return "", err
	}
	// Prices come from the embedded on-demand table, offered where the
	// cluster's nodes run, spot at EC2's latest price.
	zones := sets.New[string]()
	for _, n := range in.Nodes {
		if z := n.Labels[v1.LabelTopologyZone]; z != "" {
			zones.Insert(z)
		}
	}
	if zones.Len() > 0 {
		cat = cat.InZones(sets.List(zones))
	}
	cat, pricesNote := r.spotPriced(ctx, cat)
	// The controller's settings (--drift-on-metadata, its costs and gates) are its
	// Deployment's, as it runs now.
	ctl, _, settingsNotes, err := in.ControllerSettings()
	if err != nil {
		return "", err
	}
	if err := in.UseSettings(ctl); err != nil {
		return "", fmt.Errorf("the controller's settings: %w", err)
	}
	impact, err := simulate.PlanImpact(in, cat, ctl, time.Now(), change)
	if err != nil {
		return "", err
	}
	return withNotes(strings.TrimSpace(impact.String()), append(append(append(in.Unreadable, settingsNotes...), notes...), pricesNote)), nil
}

// spotPriced is the catalog with spot offerings at the latest spot price EC2 gives
// the provider's credentials, as the controller prices them, and a note saying
// where prices come from. The Pricing API is not asked (a plan's credentials seldom
// may): on-demand prices are the table the controller starts from. Either way the
// offerings the cluster's NodeClaims were launched into are priced as the
// controller planned them (simulate's pricedAsPlanned).
func (r *customResource) spotPriced(ctx context.Context, cat *catalog.File) (*catalog.File, string) {
	const onDemand = "on-demand prices from the embedded table the controller starts from"
	if r.clients.AWS == nil {
		return cat, "prices: " + onDemand + "; spot at on-demand (no aws block to read spot prices with)"
	}
	api := r.clients.AWS
	prices := pricing.NewProvider(api.EC2, nil, api.Region, true, clock.RealClock{}, logr.Discard())
	if err := prices.UpdateSpot(ctx); err != nil {
		return cat, fmt.Sprintf("prices: %s; spot at on-demand (the spot price history could not be read: %v)", onDemand, err)
	}
	return prices.Priced(cat), "prices: " + onDemand + "; spot at EC2's latest spot price in " + api.Region
}

// withNotes ends the impact with where its settings came from, and what of the
// controller's Deployment could not be read, so a surprise can be traced.
func withNotes(text string, notes []string) string {
	if len(notes) == 0 {
		return text
	}
	return text + "\n\nSettings:\n- " + strings.Join(notes, "\n- ")
}
