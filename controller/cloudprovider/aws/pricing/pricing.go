// Package pricing knows EC2 on-demand prices from a table generated at build time
// (make generate) from data/aws-on-demand-prices.csv. The table covers us-east-1;
// other regions fall back to it until a live source answers, as Karpenter's static
// prices do.
package pricing

//go:generate go run ../../../../hack/genprices -prices ../../../../data/aws-on-demand-prices.csv -o zz_generated.prices.go

// FallbackRegion is the region the table was captured in.
const FallbackRegion = "us-east-1"

// OnDemand returns the hourly on-demand price of an instance type in a region, and
// whether the price came from that region's own table rather than the fallback.
func OnDemand(region, instanceType string) (price float64, known, exact bool) {
	if table, ok := onDemandPrices[region]; ok {
		if p, ok := table[instanceType]; ok {
			return p, true, true
		}
	}
	p, ok := onDemandPrices[FallbackRegion][instanceType]
	return p, ok, false
}
