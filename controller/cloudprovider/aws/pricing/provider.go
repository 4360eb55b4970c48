package pricing

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	awspricing "github.com/aws/aws-sdk-go-v2/service/pricing"
	pricingtypes "github.com/aws/aws-sdk-go-v2/service/pricing/types"
	"github.com/go-logr/logr"
	"k8s.io/utils/clock"
)

// SpotAPI is the part of EC2 spot pricing uses.
type SpotAPI interface {
	DescribeSpotPriceHistory(context.Context, *ec2.DescribeSpotPriceHistoryInput, ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error)
}

// ProductsAPI is the part of the Pricing API on-demand pricing uses.
type ProductsAPI interface {
	GetProducts(context.Context, *awspricing.GetProductsInput, ...func(*awspricing.Options)) (*awspricing.GetProductsOutput, error)
}

// Provider holds the prices the controller plans with: on-demand prices from the
// generated table, replaced by the Pricing API's when it answers, and spot prices
// per zone from the spot price history. Reads never block on AWS.
type Provider struct {
	spot     SpotAPI
	products ProductsAPI
	region   string
	isolated bool
	clock    clock.Clock
	log      logr.Logger

	mu       sync.RWMutex
	onDemand map[string]float64
	spotZone map[string]map[string]float64
	version  uint64
	warned   bool
}

// NewProvider starts from the generated table. products may be nil, as in an
// isolated VPC: the Pricing API has no VPC endpoint, so it is never called and the
// log says so once.
func NewProvider(spot SpotAPI, products ProductsAPI, region string, isolated bool, clk clock.Clock, log logr.Logger) *Provider {
	p := &Provider{spot: spot, products: products, region: region, isolated: isolated, clock: clk, log: log, spotZone: map[string]map[string]float64{}}
	p.onDemand = map[string]float64{}
	table, ok := onDemandPrices[region]
	if !ok {
		table = onDemandPrices[FallbackRegion]
	}
	for k, v := range table {
		p.onDemand[k] = v
	}
	if isolated {
		log.Info("isolated VPC: on-demand prices come from the built-in table; the Pricing API is not called", "region", region)
	}
	return p
}

// Version changes whenever a price does, so callers can cache what they derive.
func (p *Provider) Version() uint64 {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.version
}

// OnDemand returns the hourly on-demand price of a type.
func (p *Provider) OnDemand(instanceType string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, ok := p.onDemand[instanceType]
	return v, ok
}

// Spot returns the latest spot price of a type in a zone.
func (p *Provider) Spot(instanceType, zone string) (float64, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	v, ok := p.spotZone[instanceType][zone]
	return v, ok
}

// UpdateSpot reads the latest Linux spot price of every type in every zone.
func (p *Provider) UpdateSpot(ctx context.Context) error {
	latest := map[string]map[string]float64{}
	seen := map[string]map[string]time.Time{}
	pages := ec2.NewDescribeSpotPriceHistoryPaginator(p.spot, &ec2.DescribeSpotPriceHistoryInput{
		ProductDescriptions: []string{"Linux/UNIX", "Linux/UNIX (Amazon VPC)"},
		StartTime:           aws.Time(p.clock.Now()),
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("describing spot price history, %w", err)
		}
		for _, h := range page.SpotPriceHistory {
			if h.AvailabilityZone == nil || h.SpotPrice == nil {
				continue
			}
			price, err := strconv.ParseFloat(*h.SpotPrice, 64)
			if err != nil {
				continue
			}
			it, zone := string(h.InstanceType), *h.AvailabilityZone
			if latest[it] == nil {
				latest[it], seen[it] = map[string]float64{}, map[string]time.Time{}
			}
			at := aws.ToTime(h.Timestamp)
			if prev, ok := seen[it][zone]; ok && prev.After(at) {
				continue
			}
			latest[it][zone], seen[it][zone] = price, at
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.spotZone = latest
	p.version++
	return nil
}

// UpdateOnDemand replaces the table with the Pricing API's prices for the region.
// In an isolated VPC it does nothing: the table is all there is.
func (p *Provider) UpdateOnDemand(ctx context.Context) error {
	if p.isolated || p.products == nil {
		return nil
	}
	prices := map[string]float64{}
	pages := awspricing.NewGetProductsPaginator(p.products, &awspricing.GetProductsInput{
		ServiceCode: aws.String("AmazonEC2"),
		Filters: []pricingtypes.Filter{
			termMatch("regionCode", p.region),
			termMatch("tenancy", "Shared"),
			termMatch("operatingSystem", "Linux"),
			termMatch("preInstalledSw", "NA"),
			termMatch("capacitystatus", "Used"),
		},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			p.mu.Lock()
			first := !p.warned
			p.warned = true
			p.mu.Unlock()
			if first {
				p.log.Info("the Pricing API did not answer; planning with the built-in on-demand prices (set --isolated-vpc when the cluster has no route to it)", "error", err.Error())
			}
			return fmt.Errorf("getting on-demand prices, %w", err)
		}
		for _, doc := range page.PriceList {
			if it, price, ok := ParseProduct(doc); ok {
				prices[it] = price
			}
		}
	}
	if len(prices) == 0 {
		return fmt.Errorf("getting on-demand prices: the Pricing API returned none for %s", p.region)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for k, v := range prices {
		p.onDemand[k] = v
	}
	p.version++
	return nil
}

func termMatch(field, value string) pricingtypes.Filter {
	return pricingtypes.Filter{Field: aws.String(field), Type: pricingtypes.FilterTypeTermMatch, Value: aws.String(value)}
}

// product is the part of a Pricing API price-list document read here.
type product struct {
	Product struct {
		Attributes struct {
			InstanceType string `json:"instanceType"`
		} `json:"attributes"`
	} `json:"product"`
	Terms struct {
		OnDemand map[string]struct {
			PriceDimensions map[string]struct {
				PricePerUnit map[string]string `json:"pricePerUnit"`
			} `json:"priceDimensions"`
		} `json:"OnDemand"`
	} `json:"terms"`
}

// ParseProduct reads the instance type and USD hourly on-demand price from one
// price-list document; ok is false when it has neither or the price is zero.
func ParseProduct(doc string) (instanceType string, price float64, ok bool) {
	var p product
	if err := json.Unmarshal([]byte(doc), &p); err != nil || p.Product.Attributes.InstanceType == "" {
		return "", 0, false
	}
	for _, term := range p.Terms.OnDemand {
		for _, dim := range term.PriceDimensions {
			v, err := strconv.ParseFloat(dim.PricePerUnit["USD"], 64)
			if err == nil && v > 0 {
				return p.Product.Attributes.InstanceType, v, true
			}
		}
	}
	return "", 0, false
}

// SpotRefresh and OnDemandRefresh are how often prices are read again.
const (
	SpotRefresh     = 10 * time.Minute
	OnDemandRefresh = 12 * time.Hour
)

// Run refreshes prices until ctx ends; it is a manager runnable.
func (p *Provider) Run(ctx context.Context) error {
	refresh := func(what string, update func(context.Context) error) {
		if err := update(ctx); err != nil && ctx.Err() == nil {
			p.log.V(1).Info("refreshing prices failed; keeping the previous ones", "prices", what, "error", err.Error())
		}
	}
	refresh("spot", p.UpdateSpot)
	refresh("on-demand", p.UpdateOnDemand)
	spot, onDemand := p.clock.Tick(SpotRefresh), p.clock.Tick(OnDemandRefresh)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-spot:
			refresh("spot", p.UpdateSpot)
		case <-onDemand:
			refresh("on-demand", p.UpdateOnDemand)
		}
	}
}
