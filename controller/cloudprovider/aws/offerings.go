package aws

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/util/sets"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/classtypes"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// GetInstanceTypes returns the types the pool's class can launch: in the zones of its
// subnets, with its kubelet's pod limit and reservations, today's prices, and without
// the offerings EC2 recently refused.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	class, err := c.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	types, _, err := c.instanceTypes(ctx, class)
	return types, err
}

func (c *CloudProvider) instanceTypes(ctx context.Context, class *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, *catalog.File, error) {
	f, zones, unavailableSeq, err := c.sources(ctx, class)
	if err != nil {
		return nil, nil, err
	}
	reservations := make([]string, 0, len(class.Status.CapacityReservations))
	for _, r := range class.Status.CapacityReservations {
		reservations = append(reservations, r.ID+"@"+r.AvailabilityZone+"/"+r.InstanceType)
	}
	key := fmt.Sprintf("%s/%d/%v/%d/%d/%p/%v/%d/%v", class.UID, class.Generation, sets.List(zones), c.prices.Version(), unavailableSeq, f, reservations, c.reserved.seq(), class.Status.PlacementGroup)
	c.mu.Lock()
	cached, ok := c.cache[class.Name]
	c.mu.Unlock()
	if ok && cached.key == key {
		// Every provisioning solve asks for every pool's types; pricing them again
		// would redo the work the key says has not changed.
		return cached.types, cached.priced, nil
	}
	priced := c.priced(f, class, zones)
	types := classtypes.ForEngine(priced, class, c.settings.VMMemoryOverheadPercent)
	c.mu.Lock()
	c.cache[class.Name] = classTypes{key: key, types: types, priced: priced}
	c.mu.Unlock()
	return types, priced, nil
}

// Offered is the region's instance types with the offerings the pool's class gets
// (its subnets' zones, today's prices, its capacity reservations, less what EC2
// recently refused), before the class shapes them: what a prediction plans with,
// shaping them by package classtypes as GetInstanceTypes does. Their pods have the
// controller's --reserved-enis taken off already: predict from them with
// ReservedENIs 0. It returns the class too.
func (c *CloudProvider) Offered(ctx context.Context, np *v1.NodePool) (*catalog.File, *awsv1.EC2NodeClass, error) {
	class, err := c.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, nil, err
	}
	f, zones, _, err := c.sources(ctx, class)
	if err != nil {
		return nil, nil, err
	}
	return c.offered(f, class, zones), class, nil
}

// sources are what the class's offerings are made from: the region's types, its
// subnets' zones, and the unavailable offerings' sequence after expired ones are
// purged; its capacity reservations are read again.
func (c *CloudProvider) sources(ctx context.Context, class *awsv1.EC2NodeClass) (*catalog.File, sets.Set[string], uint64, error) {
	f, err := c.types.List(ctx)
	if err != nil {
		return nil, nil, 0, err
	}
	zones := sets.New[string]()
	for _, s := range class.Status.Subnets {
		zones.Insert(s.Zone)
	}
	unavailableSeq := c.unavailable.Purge()
	c.reserved.refresh(ctx, class.Status.CapacityReservations)
	return f, zones, unavailableSeq, nil
}

// priced is what the class launches of the discovered types, priced in its zones.
func (c *CloudProvider) priced(f *catalog.File, class *awsv1.EC2NodeClass, zones sets.Set[string]) *catalog.File {
	offered := c.offered(f, class, zones)
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, 0, len(offered.InstanceTypes))}
	for _, e := range offered.InstanceTypes {
		if e, ok := classtypes.Entry(e, class, c.settings.ReservedENIs); ok {
			out.InstanceTypes = append(out.InstanceTypes, e)
		}
	}
	return out
}

// offered narrows the discovered types to the class's zones and prices them.
func (c *CloudProvider) offered(f *catalog.File, class *awsv1.EC2NodeClass, zones sets.Set[string]) *catalog.File {
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, 0, len(f.InstanceTypes))}
	for _, e := range f.InstanceTypes {
		offerings := make([]catalog.Offering, 0, len(e.Offerings))
		for _, o := range e.Offerings {
			if !zones.Has(o.Zone) {
				continue
			}
			o.Price = c.prices.Offering(e.Name, o.Zone, o.CapacityType, o.Price)
			o.Available = !c.unavailable.IsUnavailable(e.Name, o.Zone, o.CapacityType)
			offerings = append(offerings, o)
		}
		offerings = append(offerings, c.reservedOfferings(e, class, zones)...)
		if len(offerings) == 0 {
			continue
		}
		e.Offerings = offerings
		out.InstanceTypes = append(out.InstanceTypes, e)
	}
	return out
}

// reservedOfferings are the class's active capacity reservations of the type in its
// zones, one offering each.
func (c *CloudProvider) reservedOfferings(e catalog.Entry, class *awsv1.EC2NodeClass, zones sets.Set[string]) []catalog.Offering {
	if c.settings.DisableReservedCapacity {
		return nil
	}
	instanceType := e.Name
	price, ok := c.prices.OnDemand(instanceType)
	for _, o := range e.Offerings {
		if !ok && o.CapacityType == v1.CapacityTypeOnDemand {
			price, ok = o.Price, true
		}
	}
	var out []catalog.Offering
	for _, r := range class.Status.CapacityReservations {
		if !ok || r.InstanceType != instanceType || !zones.Has(r.AvailabilityZone) || (r.State != "" && r.State != "active") {
			continue
		}
		out = append(out, catalog.Offering{Zone: r.AvailabilityZone, CapacityType: v1.CapacityTypeReserved, Price: price * reservedPriceFactor,
			Available:     c.reserved.available(r.ID) && !c.unavailable.IsUnavailable(instanceType, r.AvailabilityZone, v1.CapacityTypeReserved),
			ReservationID: r.ID})
	}
	return out
}
