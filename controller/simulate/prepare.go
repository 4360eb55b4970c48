package simulate

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/controllers/provisioning"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// prepared is what every prediction starts from: the engine's input, built from
// the objects read as the controller builds it from the cluster, under the
// controller's settings.
type prepared struct {
	view *state.View
	snap *scheduling.Snapshot
	// overlays say which NodeOverlays the pools' types carry; buffers where each
	// CapacityBuffer's room goes, and virtual its pods (none with the gate off).
	overlays []OverlayVerdict
	buffers  []BufferPlan
	virtual  []*corev1.Pod
	terms    []commitment.Terms
}

// prepare is the one place run, decide and PlanImpact build their input.
func prepare(in *Inputs, catalog []*scheduling.InstanceType, ctl *settings.Options) (*prepared, error) {
	view, err := viewOf(in)
	if err != nil {
		return nil, err
	}
	// Workload files seldom list the claims, volumes and classes their pods name;
	// without any of them, volumes are not evaluated rather than every claim
	// reported missing.
	view.VolumesUnknown = len(in.Claims)+len(in.Volumes)+len(in.StorageClasses) == 0
	p := &prepared{view: view}
	typesOf, overlays := typesWithOverlays(in, catalog, ctl.FeatureGates.NodeOverlay)
	p.overlays = overlays
	p.snap = provisioning.SnapshotFromView(view, typesOf, ctl.NodeCosts)
	p.snap.Commitments, p.terms = ledgerOf(in)
	p.virtual, p.buffers = bufferPods(in, ctl.FeatureGates.CapacityBuffer)
	return p, nil
}
