// Package overlaid decorates a cloud provider with the NodeOverlays the NodeOverlay
// controller accepted: the types a pool plans with carry their prices and
// capacity, a launched claim the capacity its type was planned with, and a claim
// whose type's overlaid capacity changed since is drifted.
package overlaid

import (
	"context"
	"fmt"
	"maps"
	"sync"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/overlay"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// DriftCapacityOverlay is the drift reason of a claim whose type's overlaid
// capacity is not what it launched with.
const DriftCapacityOverlay cloudprovider.DriftReason = "CapacityOverlayChanged"

// UnevaluatedError is returned for a pool's types until the overlays have been
// evaluated once: planning without them could launch what they forbid (as
// Karpenter, pools wait).
type UnevaluatedError struct{ NodePool string }

func (e *UnevaluatedError) Error() string {
	return fmt.Sprintf("nodepool %q is awaiting the evaluation of NodeOverlays", e.NodePool)
}

// CloudProvider applies the accepted overlays to what the wrapped provider offers.
type CloudProvider struct {
	cloudprovider.CloudProvider
	store *overlay.Store

	mu sync.Mutex
	// last is, per pool, the overlaid types of its last read and what they were
	// computed from, so a read with nothing changed does not apply them again.
	last map[string]overlaidTypes
}

type overlaidTypes struct {
	pool    *v1.NodePool
	version uint64
	base    []*scheduling.InstanceType
	types   []*scheduling.InstanceType
}

// Decorate wraps the provider.
func Decorate(cp cloudprovider.CloudProvider, store *overlay.Store) *CloudProvider {
	return &CloudProvider{CloudProvider: cp, store: store, last: map[string]overlaidTypes{}}
}

// GetInstanceTypes returns the pool's types with the accepted overlays applied.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	base, err := c.CloudProvider.GetInstanceTypes(ctx, np)
	if err != nil {
		return nil, err
	}
	accepted, version, ok := c.store.Get()
	if !ok {
		return nil, &UnevaluatedError{NodePool: np.Name}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.last[np.Name]; ok && l.version == version && sameSlice(l.base, base) && l.pool.Generation == np.Generation && maps.Equal(l.pool.Spec.Template.Labels, np.Spec.Template.Labels) {
		return l.types, nil
	}
	types := overlay.Apply(accepted, np, base)
	c.last[np.Name] = overlaidTypes{pool: np, version: version, base: base, types: types}
	return types, nil
}

func sameSlice(a, b []*scheduling.InstanceType) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// typeOf is the overlaid type a claim of the pool launched as, from the pool's
// last read.
func (c *CloudProvider) typeOf(nc *v1.NodeClaim) *scheduling.InstanceType {
	c.mu.Lock()
	defer c.mu.Unlock()
	l, ok := c.last[nc.Labels[v1.LabelNodePool]]
	if !ok {
		return nil
	}
	name := nc.Labels[v1.LabelInstanceType]
	for _, it := range l.types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

// Create launches the claim and gives it the overlaid capacity its type was
// planned with (the extended resources an overlay adds), as Karpenter's claims
// carry.
func (c *CloudProvider) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	launched, err := c.CloudProvider.Create(ctx, c.byOverlaidPrice(nc))
	if err != nil || launched == nil {
		return launched, err
	}
	launched.Spec.Requirements = nc.Spec.Requirements
	if it := c.typeOf(launched); it != nil && it.CapacityOverlaid {
		if launched.Status.Capacity == nil {
			launched.Status.Capacity = corev1.ResourceList{}
		}
		if launched.Status.Allocatable == nil {
			launched.Status.Allocatable = corev1.ResourceList{}
		}
		for name, q := range it.Capacity.ToResourceList() {
			if _, extended := it.Capacity.Extended[name]; extended {
				launched.Status.Capacity[name] = q
			}
		}
		for name, q := range it.Allocatable.ToResourceList() {
			if _, extended := it.Allocatable.Extended[name]; extended {
				launched.Status.Allocatable[name] = q
			}
		}
	}
	return launched, nil
}

// byOverlaidPrice narrows a claim planned with overlaid prices to the offering
// that is cheapest at those prices: the wrapped provider picks by the cloud's own
// prices, which the overlays say not to (Karpenter's AWS provider launches such a
// claim with a prioritized allocation strategy for the same reason). The claim as
// stored keeps its requirements.
func (c *CloudProvider) byOverlaidPrice(nc *v1.NodeClaim) *v1.NodeClaim {
	if nc.Annotations[v1alpha1.PriceOverlayAppliedAnnotationKey] != "true" {
		return nc
	}
	c.mu.Lock()
	l, ok := c.last[nc.Labels[v1.LabelNodePool]]
	c.mu.Unlock()
	if !ok {
		return nc
	}
	it, o, err := cloudprovider.CheapestCompatible(nc, l.types)
	if err != nil {
		return nc
	}
	narrowed := nc.DeepCopy()
	pinned := map[string]string{v1.LabelInstanceType: it.Name, v1.LabelTopologyZone: o.Zone, v1.LabelCapacityType: o.CapacityType}
	reqs := narrowed.Spec.Requirements[:0]
	for _, r := range narrowed.Spec.Requirements {
		if _, ok := pinned[r.Key]; !ok {
			reqs = append(reqs, r)
		}
	}
	for _, key := range []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType} {
		reqs = append(reqs, v1.NodeSelectorRequirementWithMinValues{Key: key, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: []string{pinned[key]}}})
	}
	narrowed.Spec.Requirements = reqs
	return narrowed
}

// IsDrifted adds to the wrapped provider's reasons: the extended capacity of the
// claim's type, overlays applied, is not what the claim launched with (an overlay
// that adds, changes or removes capacity drifts the claims it concerns; a price
// changes nothing that is running).
func (c *CloudProvider) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	reason, err := c.CloudProvider.IsDrifted(ctx, nc)
	if err != nil || reason != "" {
		return reason, err
	}
	it := c.typeOf(nc)
	if it == nil {
		return "", nil
	}
	want := map[corev1.ResourceName]int64{}
	for name, n := range it.Capacity.Extended {
		if n > 0 {
			want[name] = n
		}
	}
	have := map[corev1.ResourceName]int64{}
	for name, n := range scheduling.FromResourceList(nc.Status.Capacity).Extended {
		if n > 0 {
			have[name] = n
		}
	}
	if !maps.Equal(want, have) {
		return DriftCapacityOverlay, nil
	}
	return "", nil
}
