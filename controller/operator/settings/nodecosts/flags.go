// Package nodecosts holds the flags (and environment variables) that price what a
// node costs beyond its instance, shared by the controller and `dovetail simulate`
// so that both plan the same fleet. It is its own package so that the CLI does not
// pull in the controller's manager, clients and cloud SDKs for four flags.
package nodecosts

import (
	"flag"
	"fmt"
	"strconv"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// hoursPerMonth is how AWS turns monthly EBS prices into hourly ones.
const hoursPerMonth = 730

// AddFlags registers what a node costs beyond its instance's price, with AWS's
// defaults. Each usage names its environment variable, which the controller's
// settings read (settings.Options.AddFlags).
func AddFlags(fs *flag.FlagSet, c *scheduling.NodeCosts) {
	*c = scheduling.DefaultNodeCosts()
	fs.Var(&perMonth{&c.RootVolumePerGiBHour}, "root-volume-price-per-gib-month",
		"price of a node's root volume per GiB-month (gp3: 0.08) [ROOT_VOLUME_PRICE_PER_GIB_MONTH]")
	fs.Float64Var(&c.PublicIPv4PerHour, "public-ipv4-price-per-hour", c.PublicIPv4PerHour,
		"price of a node's public IPv4 address per hour; 0 when nodes run in private subnets [PUBLIC_IPV4_PRICE_PER_HOUR]")
	fs.Float64Var(&c.PerNodeHour, "node-overhead-price-per-hour", c.PerNodeHour,
		"operational cost of one more node per hour (API load, IPs, image pulls, blast radius) [NODE_OVERHEAD_PRICE_PER_HOUR]")
	fs.Float64Var(&c.FewerNodesTolerance, "fewer-nodes-tolerance", c.FewerNodesTolerance,
		"how much more per unit of demand, as a fraction, a plan may pay to use fewer, larger nodes [FEWER_NODES_TOLERANCE]")
}

// Validate names the flag at fault.
func Validate(c scheduling.NodeCosts) []string {
	var errs []string
	for _, f := range []struct {
		name  string
		value float64
	}{{"--root-volume-price-per-gib-month", c.RootVolumePerGiBHour}, {"--public-ipv4-price-per-hour", c.PublicIPv4PerHour}, {"--node-overhead-price-per-hour", c.PerNodeHour}} {
		if f.value < 0 {
			errs = append(errs, f.name+" must not be negative")
		}
	}
	if c.FewerNodesTolerance < 0 || c.FewerNodesTolerance > 0.5 {
		errs = append(errs, "--fewer-nodes-tolerance must be in [0, 0.5], e.g. 0.02 for 2%")
	}
	return errs
}

// perMonth is a flag given per month and kept per hour.
type perMonth struct{ hourly *float64 }

func (p *perMonth) String() string {
	if p == nil || p.hourly == nil {
		return ""
	}
	return strconv.FormatFloat(*p.hourly*hoursPerMonth, 'g', -1, 64)
}

func (p *perMonth) Set(v string) error {
	f, err := strconv.ParseFloat(v, 64)
	if err != nil {
		return fmt.Errorf("%q is not a number", v)
	}
	*p.hourly = f / hoursPerMonth
	return nil
}
