package templates

import (
	"fmt"
	"io/fs"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/mitchellh/copystructure"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"helm.sh/helm/v3/pkg/releaseutil"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/dovetail-sh/dovetail/charts"
	"github.com/dovetail-sh/dovetail/controller/version"
)

// loadChart reads charts/dovetail from the binary, once.
var loadChart = sync.OnceValues(func() (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(charts.Dovetail, charts.DovetailRoot, func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := charts.Dovetail.ReadFile(name)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(name, charts.DovetailRoot+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading the embedded chart, %w", err)
	}
	c, err := loader.LoadFiles(files)
	if err != nil {
		return nil, fmt.Errorf("loading the embedded chart, %w", err)
	}
	// A released binary renders the chart released with it, as make release stamps it.
	if version.Version != "" {
		c.Metadata.Version, c.Metadata.AppVersion = strings.TrimPrefix(version.Version, "v"), version.Version
	}
	return c, nil
})

// mustImageRepository is where releases publish the controller image: the chart's
// controller.image.repository.
func mustImageRepository() string {
	c, err := loadChart()
	if err != nil {
		panic(err)
	}
	image, _ := c.Values["controller"].(map[string]any)["image"].(map[string]any)
	repository, _ := image["repository"].(string)
	if repository == "" {
		panic("charts/dovetail/values.yaml has no controller.image.repository")
	}
	return repository
}

// releaseImage is the image released with this binary, or "" in a build from source:
// no image was published for it, and guessing one (a chart version, "latest") would
// deploy a controller other than the code that plans for it.
func releaseImage() string {
	if version.Version == "" {
		return ""
	}
	return ImageRepository + ":" + version.Version
}

// ChartValues are the values of charts/dovetail that install what v describes: `helm
// install --namespace <Namespace> <Name> charts/dovetail -f <these>` and Manifests(v)
// make the same objects.
func (v Values) ChartValues() map[string]any {
	repository, tag, digest := splitImage(v.Image)
	serviceAccount := map[string]any{"create": true, "name": v.ServiceAccount}
	if v.IRSARoleARN != "" {
		serviceAccount["annotations"] = map[string]any{"eks.amazonaws.com/role-arn": v.IRSARoleARN}
	}
	out := map[string]any{
		"fullnameOverride": v.Name,
		"createNamespace":  v.CreateNamespace,
		// The provider reads this label back to know it created the namespace.
		"managedBy":      "dovetail",
		"replicas":       int64(v.Replicas),
		"serviceAccount": serviceAccount,
		"controller": map[string]any{
			"image": map[string]any{"repository": repository, "tag": tag, "digest": digest},
			"resources": map[string]any{
				"requests": map[string]any{"cpu": v.CPU, "memory": v.Memory},
				"limits":   map[string]any{"memory": v.Memory},
			},
		},
		"settings": v.Settings.chartValues(),
	}
	if v.Settings.LogLevel != "" {
		out["logLevel"] = v.Settings.LogLevel
	}
	if len(v.ExtraChartValues) > 0 {
		// CoalesceTables keeps its first argument's values and changes it in place.
		extra, err := copystructure.Copy(v.ExtraChartValues)
		if err != nil {
			panic(fmt.Sprintf("copying chart values, %v", err)) // only maps, slices and scalars: cannot fail
		}
		out = chartutil.CoalesceTables(extra.(map[string]any), out)
	}
	return out
}

func (s Settings) chartValues() map[string]any {
	out := map[string]any{"clusterName": s.ClusterName, "isolatedVPC": s.IsolatedVPC}
	set := func(key, value string) {
		if value != "" {
			out[key] = value
		}
	}
	set("clusterEndpoint", s.ClusterEndpoint)
	set("awsRegion", s.AWSRegion)
	set("interruptionQueue", s.InterruptionQueue)
	set("batchIdleDuration", s.BatchIdleDuration)
	set("batchMaxDuration", s.BatchMaxDuration)
	if len(s.FeatureGates) > 0 {
		gates := map[string]any{}
		for name, on := range s.FeatureGates {
			gates[name] = on
		}
		out["featureGates"] = gates
	}
	if len(s.AWSEndpoints) > 0 {
		endpoints := map[string]any{}
		for service, url := range s.AWSEndpoints {
			endpoints[service] = url
		}
		out["awsEndpoints"] = endpoints
	}
	// Costs at the controller's defaults are left out, so that a later release's
	// defaults apply to installs that never chose them.
	d := DefaultSettings()
	costs := map[string]any{}
	for _, c := range []struct{ key, value, is string }{
		{"rootVolumePricePerGiBMonth", s.RootVolumePricePerGiBMonth, d.RootVolumePricePerGiBMonth},
		{"publicIPv4PricePerHour", s.PublicIPv4PricePerHour, d.PublicIPv4PricePerHour},
		{"nodeOverheadPricePerHour", s.NodeOverheadPricePerHour, d.NodeOverheadPricePerHour},
		{"fewerNodesTolerance", s.FewerNodesTolerance, d.FewerNodesTolerance},
	} {
		if c.value != "" && !sameNumber(c.value, c.is) {
			costs[c.key] = c.value
		}
	}
	if len(costs) > 0 {
		out["nodeCosts"] = costs
	}
	return out
}

// splitImage splits "registry:port/repo:tag@digest" into the chart's image values.
func splitImage(image string) (repository, tag, digest string) {
	repository, digest, _ = strings.Cut(image, "@")
	if i := strings.LastIndex(repository, ":"); i > strings.LastIndex(repository, "/") {
		repository, tag = repository[:i], repository[i+1:]
	}
	return repository, tag, digest
}

// renderChart renders the chart as `helm install` would for v, in Helm's install order.
func renderChart(v Values) ([]*unstructured.Unstructured, error) {
	c, err := loadChart()
	if err != nil {
		return nil, err
	}
	values, err := chartutil.ToRenderValues(c, v.ChartValues(), chartutil.ReleaseOptions{Name: v.Name, Namespace: v.Namespace, Revision: 1, IsInstall: true}, nil)
	if err != nil {
		return nil, fmt.Errorf("chart values, %w", err)
	}
	files, err := engine.Render(c, values)
	if err != nil {
		return nil, fmt.Errorf("rendering the chart, %w", err)
	}
	_, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return nil, fmt.Errorf("sorting the chart's manifests, %w", err)
	}
	var out []*unstructured.Unstructured
	for _, m := range manifests {
		objs, err := decodeAll([]byte(m.Content))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path.Base(m.Name), err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// sameNumber reports whether two decimal strings are the same number ("0.0500" is
// "0.05").
func sameNumber(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && x == y
}
