package scheduling

import (
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Offering is one way to buy an instance type: a zone and capacity type at a price.
type Offering struct {
	Zone         string
	CapacityType string
	Price        float64
	Available    bool
	// ReservationID names the capacity reservation of a reserved offering; the engine
	// plans with its price only, launch needs the id.
	ReservationID string
}

// InstanceType is what the engine knows of a type: its labels (as requirements), its
// capacity, what the node keeps for itself, and where and how it can be bought.
type InstanceType struct {
	Name         string
	Requirements Requirements
	Capacity     Resources
	// Overhead is kube-reserved + system-reserved + eviction thresholds + the VM
	// memory the hypervisor keeps; Allocatable = Capacity - Overhead.
	Overhead    Resources
	Allocatable Resources
	Offerings   []Offering
	// CheapestPrice is the lowest available offering's price, cached for sorting.
	CheapestPrice float64
	// PriceOverlaid and CapacityOverlaid say that a NodeOverlay changed an
	// offering's price or the capacity.
	PriceOverlaid, CapacityOverlaid bool
}

// AllocatableSettings are the knobs of the allocatable formula.
type AllocatableSettings struct {
	// VMMemoryOverheadPercent is the share of memory the hypervisor and kernel keep
	// before the kubelet sees it; Karpenter's default is 7.5%.
	VMMemoryOverheadPercent float64
	// KubeReserved and SystemReserved override the EKS formulas when set.
	KubeReserved   corev1.ResourceList
	SystemReserved corev1.ResourceList
	// EvictionHard overrides the default memory.available=100Mi, nodefs.available=10%.
	EvictionHard map[string]string
}

// DefaultAllocatableSettings are EKS's defaults.
func DefaultAllocatableSettings() AllocatableSettings {
	return AllocatableSettings{VMMemoryOverheadPercent: 0.075}
}

// NewInstanceType computes the derived fields from capacity, labels and offerings.
// maxPods is the kubelet's pod limit, which also drives kube-reserved memory.
func NewInstanceType(name string, labels map[string]string, capacity corev1.ResourceList, offerings []Offering, settings AllocatableSettings) *InstanceType {
	return RequirementCache(nil).InstanceType(name, labels, capacity, offerings, settings)
}

// RequirementCache shares equal In requirements between the instance types built
// with it. The embedded catalog's 1,235 types carry 21,565 requirements, 1,823 of
// them distinct (a name each, then arch, category, zones…), each holding a set:
// shared, the types take 2.9 MB of heap for the life of the process, not 10.
// Sharing is safe because a Requirement is never changed once built. A nil cache
// shares nothing; a cache is not safe for concurrent use.
type RequirementCache map[string]*Requirement

// In is the requirement key In values, the one the cache already holds if any.
func (c RequirementCache) In(key string, values ...string) *Requirement {
	if c == nil {
		return MustRequirement(key, v1.OpIn, values...)
	}
	values = slices.Compact(slices.Sorted(slices.Values(values)))
	id := key + "\x00" + strings.Join(values, "\x00")
	if r, ok := c[id]; ok {
		return r
	}
	r := MustRequirement(key, v1.OpIn, values...)
	c[id] = r
	return r
}

// DoesNotExist is the requirement that a node lacks the label key, shared like In's.
func (c RequirementCache) DoesNotExist(key string) *Requirement {
	if c == nil {
		return MustRequirement(key, v1.OpDoesNotExist)
	}
	id := key + "\x00\x01DoesNotExist"
	if r, ok := c[id]; ok {
		return r
	}
	r := MustRequirement(key, v1.OpDoesNotExist)
	c[id] = r
	return r
}

// InstanceType is NewInstanceType with the requirements shared through the cache.
func (c RequirementCache) InstanceType(name string, labels map[string]string, capacity corev1.ResourceList, offerings []Offering, settings AllocatableSettings) *InstanceType {
	capRes := FromResourceList(capacity)
	it := &InstanceType{Name: name, Capacity: capRes, Offerings: offerings}
	it.Requirements = make(Requirements, len(labels)+3)
	for k, v := range labels {
		it.Requirements.Add(c.In(k, v))
	}
	it.Requirements.Add(c.In(v1.LabelInstanceType, name))
	for key := range v1.InstanceTypeLabels {
		if _, ok := labels[key]; !ok {
			it.Requirements[key] = c.DoesNotExist(key)
		}
	}
	zones, capacityTypes := []string{}, []string{}
	for _, o := range offerings {
		zones = append(zones, o.Zone)
		capacityTypes = append(capacityTypes, o.CapacityType)
	}
	it.Requirements[v1.LabelTopologyZone] = c.In(v1.LabelTopologyZone, zones...)
	it.Requirements[v1.LabelCapacityType] = c.In(v1.LabelCapacityType, capacityTypes...)
	it.Overhead = computeOverhead(capRes, settings)
	it.Refresh()
	return it
}

// withReservationFreed is it with its offerings in reservation id available, or it
// itself when it has none that are not.
func (it *InstanceType) withReservationFreed(id string) *InstanceType {
	i := slices.IndexFunc(it.Offerings, func(o Offering) bool { return o.ReservationID == id && !o.Available })
	if i < 0 {
		return it
	}
	freed := *it
	freed.Offerings = slices.Clone(it.Offerings)
	for j := range freed.Offerings {
		if freed.Offerings[j].ReservationID == id {
			freed.Offerings[j].Available = true
			freed.CheapestPrice = min(freed.CheapestPrice, freed.Offerings[j].Price)
		}
	}
	return &freed
}

// Refresh computes Allocatable and CheapestPrice again after Capacity or the
// offerings changed. Hugepages are carved out of memory, so what they take is not
// allocatable as memory too.
func (it *InstanceType) Refresh() {
	it.Allocatable = it.Capacity.Sub(it.Overhead)
	for name, n := range it.Capacity.Extended {
		if strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			it.Allocatable.Memory -= n
		}
	}
	if it.Allocatable.Memory < 0 {
		it.Allocatable.Memory = 0
	}
	it.CheapestPrice = math.Inf(1)
	for _, o := range it.Offerings {
		if o.Available && o.Price < it.CheapestPrice {
			it.CheapestPrice = o.Price
		}
	}
}

// computeOverhead applies the EKS AMI formulas: kube-reserved cpu by core tiers and
// memory as 11Mi per pod + 255Mi, 1Gi of ephemeral storage, hard eviction at
// 100Mi memory and 10% of the root disk, and the VM memory overhead.
func computeOverhead(capacity Resources, s AllocatableSettings) Resources {
	var kube Resources
	if len(s.KubeReserved) > 0 {
		kube = FromResourceList(s.KubeReserved)
	} else {
		kube.MilliCPU = eksReservedMilliCPU(capacity.MilliCPU)
		kube.Memory = (11*capacity.Pods + 255) * 1024 * 1024
		kube.EphemeralStorage = 1 << 30
	}
	if len(s.SystemReserved) > 0 {
		kube = kube.Add(FromResourceList(s.SystemReserved))
	}
	evictMemory := int64(100 * 1024 * 1024)
	evictStorage := capacity.EphemeralStorage / 10
	if v, ok := s.EvictionHard["memory.available"]; ok {
		evictMemory = percentOrQuantity(v, capacity.Memory)
	}
	if v, ok := s.EvictionHard["nodefs.available"]; ok {
		evictStorage = percentOrQuantity(v, capacity.EphemeralStorage)
	}
	vm := int64(math.Ceil(float64(capacity.Memory) * s.VMMemoryOverheadPercent))
	return Resources{
		MilliCPU:         kube.MilliCPU,
		Memory:           kube.Memory + evictMemory + vm,
		EphemeralStorage: kube.EphemeralStorage + evictStorage,
		Extended:         kube.Extended,
	}
}

func percentOrQuantity(v string, total int64) int64 {
	if pct, ok := strings.CutSuffix(v, "%"); ok {
		f, err := strconv.ParseFloat(pct, 64)
		if err != nil {
			return 0
		}
		return int64(float64(total) * f / 100)
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0
	}
	return q.Value()
}

// eksReservedMilliCPU: 6% of the first core, 1% of the second, 0.5% of the third and
// fourth, 0.25% of every core after.
func eksReservedMilliCPU(milliCPU int64) int64 {
	tiers := []struct {
		upTo    int64
		percent float64
	}{{1000, 0.06}, {2000, 0.01}, {4000, 0.005}, {math.MaxInt64, 0.0025}}
	var reserved float64
	var prev int64
	for _, t := range tiers {
		if milliCPU <= prev {
			break
		}
		span := min(milliCPU, t.upTo) - prev
		reserved += float64(span) * t.percent
		prev = t.upTo
	}
	return int64(math.Ceil(reserved))
}

// cheapestOffering returns the cheapest available offering the requirements allow.
func (it *InstanceType) cheapestOffering(reqs Requirements) (Offering, bool) {
	zone, ct := reqs[v1.LabelTopologyZone], reqs[v1.LabelCapacityType]
	best, found := Offering{}, false
	for _, o := range it.Offerings {
		if !o.Available || (zone != nil && !zone.Has(o.Zone)) || (ct != nil && !ct.Has(o.CapacityType)) {
			continue
		}
		if !found || o.Price < best.Price || (o.Price == best.Price && o.Zone < best.Zone) {
			best, found = o, true
		}
	}
	return best, found
}

// compatible reports whether the type's labels and offerings meet the requirements.
func (it *InstanceType) compatible(reqs Requirements) bool {
	if !it.labelsMeet(reqs) {
		return false
	}
	_, ok := it.cheapestOffering(reqs)
	return ok
}

// labelsMeet reports whether a node of the type can meet the requirements, whatever
// capacity is available.
func (it *InstanceType) labelsMeet(reqs Requirements) bool {
	for key, r := range reqs {
		if !it.allows(key, r) {
			return false
		}
	}
	return true
}

// allows reports whether a node of the type can meet want on key. A key the type
// does not define is the pool's to set (a template label, a requirement of its
// own), unless nothing meets want (a template label the pool's own requirement
// excludes); a label the type defines as absent meets only what absence meets (NotIn,
// DoesNotExist), as a Node without the label does in Kubernetes.
func (it *InstanceType) allows(key string, want *Requirement) bool {
	mine, ok := it.Requirements[key]
	if !ok {
		return want.Satisfiable()
	}
	if mine.AllowsAbsent() && want.AllowsAbsent() {
		return true
	}
	return mine.Overlaps(want)
}

// compatibleOn is compatible restricted to some keys; offerings are rechecked when a
// zone or capacity type changed.
func (it *InstanceType) compatibleOn(reqs Requirements, keys []string) bool {
	offerings := false
	for _, key := range keys {
		if key == v1.LabelTopologyZone || key == v1.LabelCapacityType {
			offerings = true
		}
		if !it.allows(key, reqs[key]) {
			return false
		}
	}
	if offerings {
		_, ok := it.cheapestOffering(reqs)
		return ok
	}
	return true
}

// sortByPrice orders instance types cheapest first, by name for ties.
func sortByPrice(its []*InstanceType) {
	sort.SliceStable(its, func(i, j int) bool {
		if its[i].CheapestPrice != its[j].CheapestPrice {
			return its[i].CheapestPrice < its[j].CheapestPrice
		}
		return its[i].Name < its[j].Name
	})
}

// launchOrder is the order in which a launch takes the capacity types a claim
// allows: a reservation it has, then spot, then on-demand.
var launchOrder = []string{v1.CapacityTypeReserved, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand}

// WorstLaunch is the most a launch of it under reqs may pay, and the capacity type
// it takes: EC2 picks the zone, so the dearest available offering reqs allow, of
// the capacity type the launch takes first. ok is false when no offering is allowed.
func WorstLaunch(it *InstanceType, reqs Requirements) (price float64, capacityType string, ok bool) {
	zone, ct := reqs.Get(v1.LabelTopologyZone), reqs.Get(v1.LabelCapacityType)
	for _, want := range launchOrder {
		if !ct.Has(want) {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CapacityType == want && zone.Has(o.Zone) && (!ok || o.Price > price) {
				price, ok = o.Price, true
			}
		}
		if ok {
			return price, want, true
		}
	}
	return 0, "", false
}

// CheapestOffering is the cheapest available offering of it that reqs allow.
func CheapestOffering(it *InstanceType, reqs Requirements) (Offering, bool) {
	return it.cheapestOffering(reqs)
}

// Compatible reports whether it's labels and offerings meet reqs.
func Compatible(it *InstanceType, reqs Requirements) bool { return it.compatible(reqs) }
