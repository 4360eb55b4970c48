package simulate

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/classtypes"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/engineinput"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/provreq"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// prepared is what every prediction starts from: the engine's input, built from
// the objects read as the controller builds it from the cluster, under the
// controller's settings.
type prepared struct {
	view *state.View
	snap *scheduling.Snapshot
	// catalog is the types of a pool whose EC2NodeClass the input lacks.
	catalog []*scheduling.InstanceType
	// overlays say which NodeOverlays the pools' types carry; buffers where each
	// CapacityBuffer's room goes, and virtual its pods (none with the gate off).
	overlays []OverlayVerdict
	buffers  []BufferPlan
	virtual  []*corev1.Pod
	terms    []commitment.Terms
	// bookings are the provisioned ProvisioningRequests' capacity, held in every
	// snapshot as the controller holds it.
	bookings []provreq.Booking
	// typesOf and costs rebuild snap as the cluster changes between rounds.
	typesOf func(*v1.NodePool) []*scheduling.InstanceType
	costs   scheduling.NodeCosts
}

// prepare is the one place run, decide and PlanImpact build their input.
func prepare(in *Inputs, cat *catalog.File, ctl *settings.Options) (*prepared, error) {
	view, err := viewOf(in)
	if err != nil {
		return nil, err
	}
	// Workload files seldom list the claims, volumes and classes their pods name;
	// without any of them, volumes are not evaluated rather than every claim
	// reported missing.
	view.VolumesUnknown = len(in.Claims)+len(in.Volumes)+len(in.StorageClasses) == 0
	// The controller's prices, where the snapshot's claims say them.
	cat = pricedAsPlanned(cat, in.NodeClaims)
	allocatable := scheduling.DefaultAllocatableSettings()
	allocatable.VMMemoryOverheadPercent = ctl.VMMemoryOverheadPercent
	p := &prepared{view: view, catalog: cat.WithReservedENIs(ctl.ReservedENIs).ForEngine(allocatable), costs: ctl.NodeCosts}
	typesOf, overlays := typesWithOverlays(in, classTypes(in, cat, ctl, p.catalog), ctl.FeatureGates.NodeOverlay)
	p.overlays, p.typesOf = overlays, typesOf
	p.snap = engineinput.FromView(view, typesOf, ctl.NodeCosts)
	p.snap.Commitments, p.terms = ledgerOf(in)
	p.virtual, p.buffers = bufferPods(in, ctl.FeatureGates.CapacityBuffer)
	p.bookings = heldBookings(in)
	provreq.Hold(p.snap, p.bookings)
	return p, nil
}

// classTypes gives each pool the types its EC2NodeClass makes of the catalog, as
// the AWS provider does (the kubelet's maxPods, podsPerCore and reservations,
// placement groups, cpuOptions, interfaces, a Windows family; the zones of its
// resolved subnets, when its status has them); a pool whose class is not in the
// input gets the catalog as it is.
func classTypes(in *Inputs, cat *catalog.File, ctl *settings.Options, plain []*scheduling.InstanceType) func(*v1.NodePool) []*scheduling.InstanceType {
	byClass := map[string][]*scheduling.InstanceType{}
	for _, class := range in.NodeClasses {
		byClass[class.Name] = shaped(cat, class, ctl)
	}
	return func(np *v1.NodePool) []*scheduling.InstanceType {
		ref := np.Spec.Template.Spec.NodeClassRef
		if ref == nil || ref.Kind != "EC2NodeClass" {
			return plain
		}
		if types, ok := byClass[ref.Name]; ok {
			return types
		}
		return plain
	}
}

func shaped(cat *catalog.File, class *awsv1.EC2NodeClass, ctl *settings.Options) []*scheduling.InstanceType {
	zones := sets.New[string]()
	for _, s := range class.Status.Subnets {
		zones.Insert(s.Zone)
	}
	if zones.Len() > 0 {
		cat = inZones(cat, zones)
	}
	return classtypes.Of(cat, class, ctl.ReservedENIs, ctl.VMMemoryOverheadPercent)
}

// inZones is the catalog offered only in zones; a type offered in none goes.
func inZones(cat *catalog.File, zones sets.Set[string]) *catalog.File {
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, 0, len(cat.InstanceTypes))}
	for _, e := range cat.InstanceTypes {
		offerings := make([]catalog.Offering, 0, len(e.Offerings))
		for _, o := range e.Offerings {
			if zones.Has(o.Zone) {
				offerings = append(offerings, o)
			}
		}
		if len(offerings) > 0 {
			e.Offerings = offerings
			out.InstanceTypes = append(out.InstanceTypes, e)
		}
	}
	return out
}
