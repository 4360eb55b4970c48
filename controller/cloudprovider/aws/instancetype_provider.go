package aws

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
)

// InstanceTypeTTL is how long discovered instance types are trusted. A region's
// types and the zones offering them change a few times a year: an hour picks up
// a new one soon enough, at 15 paged calls an hour instead of every 5 minutes
// (Karpenter refreshes every 12 hours).
const InstanceTypeTTL = time.Hour

// InstanceTypeRetry is how long the last good list is served after a refresh failed
// before EC2 is asked again: often enough to recover quickly, seldom enough not to
// add to the throttling that is often the cause.
const InstanceTypeRetry = 30 * time.Second

// EC2API is the part of the EC2 API instance-type discovery uses.
type EC2API interface {
	DescribeInstanceTypes(context.Context, *ec2.DescribeInstanceTypesInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error)
	DescribeInstanceTypeOfferings(context.Context, *ec2.DescribeInstanceTypeOfferingsInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error)
}

// InstanceTypeProvider discovers the region's instance types and where they are
// offered, prices them, and caches the result.
type InstanceTypeProvider struct {
	ec2      EC2API
	region   string
	settings Settings
	clock    clock.Clock

	mu      sync.Mutex
	cached  *catalog.File
	fetched time.Time
	failed  time.Time
}

// NewInstanceTypeProvider builds a provider.
func NewInstanceTypeProvider(api EC2API, region string, settings Settings, clk clock.Clock) *InstanceTypeProvider {
	return &InstanceTypeProvider{ec2: api, region: region, settings: settings, clock: clk}
}

// List returns the instance types with offerings in the region's zones, refreshing
// them when the cache is older than InstanceTypeTTL. A failed refresh serves the
// last good list (the types of a region seldom change, and provisioning must not stop
// because EC2 throttled one call); it fails only when no list was ever loaded.
func (p *InstanceTypeProvider) List(ctx context.Context) (*catalog.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cached != nil && (p.clock.Since(p.fetched) < InstanceTypeTTL || p.clock.Since(p.failed) < InstanceTypeRetry) {
		return p.cached, nil
	}
	f, err := p.load(ctx)
	if err != nil {
		InstanceTypeRefreshErrors.Inc()
		if p.cached == nil {
			return nil, err
		}
		p.failed = p.clock.Now()
		log.FromContext(ctx).Error(err, "refreshing instance types; serving the last good list", "age", p.clock.Since(p.fetched).Round(time.Second).String())
		return p.cached, nil
	}
	p.cached, p.fetched = f, p.clock.Now()
	return f, nil
}

func (p *InstanceTypeProvider) load(ctx context.Context) (*catalog.File, error) {
	infos, err := p.describeInstanceTypes(ctx)
	if err != nil {
		return nil, err
	}
	zones, err := p.describeOfferings(ctx)
	if err != nil {
		return nil, err
	}
	f := &catalog.File{}
	for _, info := range infos {
		name := string(info.InstanceType)
		price, known, _ := pricing.OnDemand(p.region, name)
		if !known || len(zones[name]) == 0 {
			// Without a price the engine could not compare it; without a zone it
			// cannot be launched.
			continue
		}
		if e, ok := CatalogEntry(info, zones[name], price, ENIMaxPods(info, p.settings.ReservedENIs)); ok {
			f.InstanceTypes = append(f.InstanceTypes, e)
		}
	}
	sort.Slice(f.InstanceTypes, func(i, j int) bool { return f.InstanceTypes[i].Name < f.InstanceTypes[j].Name })
	return f, nil
}

func (p *InstanceTypeProvider) describeInstanceTypes(ctx context.Context) ([]ec2types.InstanceTypeInfo, error) {
	var out []ec2types.InstanceTypeInfo
	pages := ec2.NewDescribeInstanceTypesPaginator(p.ec2, &ec2.DescribeInstanceTypesInput{})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance types, %w", err)
		}
		out = append(out, page.InstanceTypes...)
	}
	return out, nil
}

// describeOfferings maps each instance type to the zones that offer it.
func (p *InstanceTypeProvider) describeOfferings(ctx context.Context) (map[string][]string, error) {
	zones := map[string][]string{}
	pages := ec2.NewDescribeInstanceTypeOfferingsPaginator(p.ec2, &ec2.DescribeInstanceTypeOfferingsInput{LocationType: ec2types.LocationTypeAvailabilityZone})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describing instance type offerings, %w", err)
		}
		for _, o := range page.InstanceTypeOfferings {
			if o.Location != nil {
				zones[string(o.InstanceType)] = append(zones[string(o.InstanceType)], *o.Location)
			}
		}
	}
	for _, z := range zones {
		sort.Strings(z)
	}
	return zones, nil
}
