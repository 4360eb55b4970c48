package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/dovetail-sh/dovetail/templates"
)

// keyValues is a repeatable "k=v,k=v" flag.
type keyValues map[string]string

func (kv keyValues) String() string { return fmt.Sprint(map[string]string(kv)) }
func (kv keyValues) Set(v string) error {
	for _, pair := range strings.Split(v, ",") {
		k, val, ok := strings.Cut(pair, "=")
		if !ok || k == "" {
			return fmt.Errorf("%q is not key=value", pair)
		}
		kv[k] = val
	}
	return nil
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

// renderCmd prints the same manifests dovetail_controller applies.
func renderCmd(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	fs.SetOutput(stderr)
	v := templates.DefaultValues()
	fs.StringVar(&v.Settings.ClusterName, "cluster-name", "", "EKS cluster name (required)")
	fs.StringVar(&v.Settings.ClusterEndpoint, "cluster-endpoint", "", "API server URL nodes join; default: read from EKS")
	fs.StringVar(&v.Settings.AWSRegion, "aws-region", "", "AWS region; default: the pod's (IRSA / Pod Identity set AWS_REGION)")
	fs.StringVar(&v.Settings.InterruptionQueue, "interruption-queue", "", "SQS queue of spot interruptions (dovetail_interruption_queue)")
	fs.BoolVar(&v.Settings.IsolatedVPC, "isolated-vpc", false, "no internet route: never call the Pricing API")
	fs.StringVar(&v.Settings.LogLevel, "log-level", v.Settings.LogLevel, "debug, info or error")
	fs.StringVar(&v.Settings.BatchIdleDuration, "batch-idle-duration", v.Settings.BatchIdleDuration, "close a provisioning batch after this long without new pods")
	fs.StringVar(&v.Settings.BatchMaxDuration, "batch-max-duration", v.Settings.BatchMaxDuration, "close a provisioning batch after this long regardless")
	gates := keyValues{}
	fs.Var(gates, "feature-gates", "Name=true,... (SpotToSpotConsolidation, NodeRepair)")
	endpoints := keyValues{}
	fs.Var(endpoints, "aws-endpoints", "service=URL,... endpoint overrides")
	fs.StringVar(&v.Name, "name", v.Name, "name of the Deployment, Service, RBAC objects")
	fs.StringVar(&v.Namespace, "namespace", v.Namespace, "namespace of the controller")
	noNamespace := fs.Bool("no-namespace", false, "do not emit the Namespace (it exists already)")
	fs.StringVar(&v.ServiceAccount, "service-account", v.ServiceAccount, "ServiceAccount name (the one a Pod Identity association names)")
	fs.StringVar(&v.IRSARoleARN, "irsa-role-arn", "", "annotate the ServiceAccount for IRSA with this role (dovetail_controller_role)")
	imageUsage := "controller image"
	if v.Image == "" {
		imageUsage += " (required: a build from source has no image of its own)"
	}
	fs.StringVar(&v.Image, "image", v.Image, imageUsage)
	fs.IntVar(&v.Replicas, "replicas", v.Replicas, "controller replicas (one leads)")
	fs.StringVar(&v.CPU, "cpu", v.CPU, "CPU request")
	fs.StringVar(&v.Memory, "memory", v.Memory, "memory request and limit")
	var valueFiles stringList
	fs.Var(&valueFiles, "values", "a values file of charts/dovetail (values.yaml's names: tolerations, nodeSelector, serviceMonitor, ...); repeatable, later files win; a flag given explicitly wins over every file, as helm's --set does over -f")
	fs.Var(&valueFiles, "f", "short for --values")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	for _, file := range valueFiles {
		vals, err := chartutil.ReadValuesFile(file)
		if err != nil {
			fmt.Fprintf(stderr, "dovetail render: --values %s: %v\n", file, err)
			return 2
		}
		v.ExtraChartValues = chartutil.CoalesceTables(vals.AsMap(), v.ExtraChartValues)
	}
	// A flag given explicitly wins over the files, as helm's --set does over -f: a
	// Karpenter values file's empty settings.clusterName must not undo
	// --cluster-name.
	if len(valueFiles) > 0 {
		flagged := v
		flagged.ExtraChartValues = nil
		fromFlags := flagged.ChartValues()
		fs.Visit(func(f *flag.Flag) {
			for _, path := range flagValuePaths[f.Name] {
				if value, ok := lookPath(fromFlags, path); ok {
					v.ExtraChartValues = setPath(v.ExtraChartValues, path, value)
				}
			}
		})
	}
	if v.Settings.ClusterName == "" {
		// A values file may name the cluster, as it would for helm install.
		if name, err := chartutil.Values(v.ExtraChartValues).PathValue("settings.clusterName"); err == nil {
			v.Settings.ClusterName, _ = name.(string)
		}
	}
	if v.Settings.ClusterName == "" {
		fmt.Fprintln(stderr, "dovetail render: --cluster-name (or settings.clusterName in a --values file) is required: the controller tags and finds its instances by it")
		return 2
	}
	if v.Image == "" {
		v.Image = valuesImage(v.ExtraChartValues)
	}
	if v.Image == "" {
		fmt.Fprintln(stderr, "dovetail render: --image (or controller.image.repository and tag in a --values file) is required: "+templates.NoImage)
		return 2
	}
	v.CreateNamespace = !*noNamespace
	if len(gates) > 0 {
		v.Settings.FeatureGates = map[string]bool{}
		for k, val := range gates {
			b, err := strconv.ParseBool(val)
			if err != nil {
				fmt.Fprintf(stderr, "dovetail render: --feature-gates %s=%s: use true or false\n", k, val)
				return 2
			}
			v.Settings.FeatureGates[k] = b
		}
	}
	v.Settings.AWSEndpoints = endpoints
	if err := templates.Render(stdout, v); err != nil {
		fmt.Fprintf(stderr, "dovetail render: %v\n", err)
		return 1
	}
	return 0
}

// valuesImage is the image a Karpenter-style values file names, repository:tag[@digest],
// or "" when it names no tag.
func valuesImage(values map[string]any) string {
	vals := chartutil.Values(values)
	str := func(path string) string {
		v, _ := vals.PathValue(path)
		s, _ := v.(string)
		return s
	}
	repository, tag := str("controller.image.repository"), str("controller.image.tag")
	if repository == "" {
		repository = templates.ImageRepository
	}
	if tag == "" {
		return ""
	}
	image := repository + ":" + tag
	if digest := str("controller.image.digest"); digest != "" {
		image += "@" + digest
	}
	return image
}

// flagValuePaths are the chart values each flag of render sets.
var flagValuePaths = map[string][]string{
	"cluster-name":        {"settings.clusterName"},
	"cluster-endpoint":    {"settings.clusterEndpoint"},
	"aws-region":          {"settings.awsRegion"},
	"interruption-queue":  {"settings.interruptionQueue"},
	"isolated-vpc":        {"settings.isolatedVPC"},
	"log-level":           {"logLevel"},
	"batch-idle-duration": {"settings.batchIdleDuration"},
	"batch-max-duration":  {"settings.batchMaxDuration"},
	"name":                {"fullnameOverride"},
	"service-account":     {"serviceAccount.name"},
	"irsa-role-arn":       {"serviceAccount.annotations"},
	"image":               {"controller.image"},
	"replicas":            {"replicas"},
	"cpu":                 {"controller.resources.requests.cpu"},
	"memory":              {"controller.resources.requests.memory", "controller.resources.limits.memory"},
}

// lookPath reads a dotted path of nested maps.
func lookPath(values map[string]any, path string) (any, bool) {
	var cur any = values
	for _, key := range strings.Split(path, ".") {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[key]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// setPath writes value at a dotted path, making the maps on the way.
func setPath(values map[string]any, path string, value any) map[string]any {
	if values == nil {
		values = map[string]any{}
	}
	keys := strings.Split(path, ".")
	m := values
	for _, key := range keys[:len(keys)-1] {
		next, ok := m[key].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[key] = next
		}
		m = next
	}
	m[keys[len(keys)-1]] = value
	return values
}
