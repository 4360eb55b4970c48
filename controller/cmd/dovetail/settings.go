package main

import (
	"flag"
	"fmt"
	"io"
	"regexp"

	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/simulate"
)

// predictionFlags are the controller's settings that change what it decides,
// which simulate and explain take under the controller's own flag names.
var predictionFlags = []string{"feature-gates", "drift-on-metadata", "vm-memory-overhead-percent", "scheduler-config",
	"root-volume-price-per-gib-month", "public-ipv4-price-per-hour", "node-overhead-price-per-hour", "fewer-nodes-tolerance"}

// controllerFlags registers predictionFlags on fs. What the command line gives is
// kept as given, to be set over the settings of the controller's Deployment in
// the input (flags over the Deployment, as a flag is over env in the controller).
type controllerFlags struct {
	given [][2]string
}

func (c *controllerFlags) register(fs *flag.FlagSet) {
	// A scratch set of the controller's flags parses each value as the controller
	// would, so a bad one is refused at parse time.
	scratch := flag.NewFlagSet("scratch", flag.ContinueOnError)
	new(settings.Options).AddFlagsFrom(scratch, func(string) (string, bool) { return "", false })
	for _, name := range predictionFlags {
		f := scratch.Lookup(name)
		// The CLI reads no environment: the variable the usage names is the
		// controller's, read from its Deployment.
		usage := envInUsage.ReplaceAllString(f.Usage, "(the controller's $1)")
		fs.Var(&givenValue{Value: f.Value, name: name, given: &c.given}, name, "the controller's --"+name+": "+usage)
	}
}

// set records a setting as if given on the command line (--spot-to-spot).
func (c *controllerFlags) set(name, value string) { c.given = append(c.given, [2]string{name, value}) }

// resolve is the controller's settings for a prediction: the input's (its
// controller Deployment's, else the defaults), with the flags given over them.
func (c *controllerFlags) resolve(in *simulate.Inputs) (*settings.Options, []string, error) {
	ctl, fs, notes, err := in.ControllerSettings()
	if err != nil {
		return nil, notes, err
	}
	for _, kv := range c.given {
		if err := fs.Set(kv[0], kv[1]); err != nil {
			return nil, notes, fmt.Errorf("--%s: %w", kv[0], err)
		}
	}
	return ctl, notes, nil
}

// settingsFor resolves the settings for cmd, printing where they came from, and
// applies the scheduler defaults they give to the input; nil and the exit code
// when they do not hold.
func (c *controllerFlags) settingsFor(in *simulate.Inputs, spotToSpot bool, cmd string, stderr io.Writer) (*settings.Options, int) {
	if spotToSpot {
		c.set("feature-gates", "SpotToSpotConsolidation=true")
	}
	ctl, notes, err := c.resolve(in)
	for _, n := range notes {
		fmt.Fprintf(stderr, "%s: %s\n", cmd, n)
	}
	if len(c.given) > 0 {
		fmt.Fprintf(stderr, "%s: the flags given here override them\n", cmd)
	}
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, 2
	}
	if err := in.UseSettings(ctl); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd, err)
		return nil, 2
	}
	return ctl, 0
}

// givenValue parses into a scratch value, and keeps what was given.
type givenValue struct {
	flag.Value
	name  string
	given *[][2]string
}

// envInUsage is the "[NAME]" a controller flag's usage ends with.
var envInUsage = regexp.MustCompile(`\[([A-Z][A-Z0-9_]*)\]$`)

// String is the scratch value's; flag's help calls it on a zero givenValue too.
func (g *givenValue) String() string {
	if g == nil || g.Value == nil {
		return ""
	}
	return g.Value.String()
}

func (g *givenValue) Set(v string) error {
	if err := g.Value.Set(v); err != nil {
		return err
	}
	*g.given = append(*g.given, [2]string{g.name, v})
	return nil
}

// IsBoolFlag keeps --drift-on-metadata usable without a value.
func (g *givenValue) IsBoolFlag() bool {
	b, ok := g.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}
