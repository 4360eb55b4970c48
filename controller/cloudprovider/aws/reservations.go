package aws

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
)

// ReservationCountTTL is how long the instances a capacity reservation can still take
// are trusted. Between refreshes each launch into it counts against it, so a burst
// does not plan more nodes into a reservation than it holds.
const ReservationCountTTL = 30 * time.Second

// reservedPriceFactor prices a reserved offering: the reservation is paid for whether
// or not it runs an instance, so using it costs next to nothing, and the engine fills
// reservations before it buys spot or on-demand capacity. Relative prices are kept, so
// among reservations the cheaper type still wins.
const reservedPriceFactor = 1e-6

// reservationCounts tracks how many more instances each capacity reservation the
// classes name can take.
type reservationCounts struct {
	api   nodeclass.CapacityReservationAPI
	clock clock.Clock

	mu      sync.Mutex
	counts  map[string]int32
	fetched map[string]time.Time
	version uint64
	// returned are the instances whose places went back to their reservations.
	returned map[string]bool
}

func newReservationCounts(api nodeclass.CapacityReservationAPI, clk clock.Clock) *reservationCounts {
	return &reservationCounts{api: api, clock: clk, counts: map[string]int32{}, fetched: map[string]time.Time{}, returned: map[string]bool{}}
}

// refresh asks EC2 for the reservations whose counts are missing or stale. A failure
// keeps the old counts: a reservation EC2 could not be asked about is tried, and a
// launch EC2 refuses marks it unavailable.
func (r *reservationCounts) refresh(ctx context.Context, reservations []awsv1.CapacityReservation) {
	r.mu.Lock()
	var stale []string
	for _, res := range reservations {
		if at, ok := r.fetched[res.ID]; !ok || r.clock.Since(at) >= ReservationCountTTL {
			stale = append(stale, res.ID)
		}
	}
	r.mu.Unlock()
	if len(stale) == 0 {
		return
	}
	found := map[string]int32{}
	pages := ec2.NewDescribeCapacityReservationsPaginator(r.api, &ec2.DescribeCapacityReservationsInput{CapacityReservationIds: stale})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			log.FromContext(ctx).Error(err, "counting the instances capacity reservations can take; keeping the last counts", "reservations", stale)
			return
		}
		for _, res := range page.CapacityReservations {
			if res.AvailableInstanceCount != nil && res.CapacityReservationId != nil {
				found[*res.CapacityReservationId] = *res.AvailableInstanceCount
			}
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	for _, id := range stale {
		// A reservation EC2 no longer lists (ended, cancelled) takes nothing.
		if r.counts[id] != found[id] {
			r.version++
		}
		r.counts[id], r.fetched[id] = found[id], now
	}
}

// available says whether the reservation can take another instance.
func (r *reservationCounts) available(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	n, ok := r.counts[id]
	return !ok || n > 0
}

// launched counts an instance launched into the reservation.
func (r *reservationCounts) launched(id string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.counts[id] > 0 {
		r.counts[id]--
		r.version++
	}
}

// terminated gives the place a terminated instance held back to its reservation,
// once: EC2 frees it as the instance terminates, and waiting for the next count
// would leave a node that went first to free it (terminate-first) without its
// replacement for as long. Like Karpenter's, it may overestimate for a moment;
// a launch EC2 then refuses marks the reservation unavailable.
func (r *reservationCounts) terminated(id, instance string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.returned[instance] {
		return
	}
	r.returned[instance] = true
	if n, ok := r.counts[id]; ok {
		r.counts[id] = n + 1
		r.version++
	}
}

// seq changes whenever a count does, for caches of what the counts decide.
func (r *reservationCounts) seq() uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.version
}

// labelReservation marks a claim as launched into the class's reservation id.
func labelReservation(nc *v1.NodeClaim, class *awsv1.EC2NodeClass, id string) {
	nc.Labels[v1.LabelCapacityType] = v1.CapacityTypeReserved
	nc.Labels[v1.LabelCapacityReservationID] = id
	nc.Labels[v1.LabelCapacityReservationType] = reservationType(class, id)
	nc.Labels[v1.LabelCapacityReservationInterruptible] = fmt.Sprint(interruptible(class, id))
}

// interruptible reports whether the class's record of the reservation says its
// owner may reclaim it.
func interruptible(class *awsv1.EC2NodeClass, id string) bool {
	for _, res := range class.Status.CapacityReservations {
		if res.ID == id {
			return res.Interruptible
		}
	}
	return false
}

// reservationType is the class's record of the reservation's type.
func reservationType(class *awsv1.EC2NodeClass, id string) string {
	for _, res := range class.Status.CapacityReservations {
		if res.ID == id && res.ReservationType != "" {
			return res.ReservationType
		}
	}
	return nodeclass.ReservationTypeDefault
}
