package templates

import (
	"bufio"
	"bytes"
	_ "embed"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

//go:embed manifests/controller.yaml.tmpl
var controllerTemplate string

//go:embed manifests/kwok-provider.yaml.tmpl
var kwokProviderTemplate string

// DefaultImage is the controller image of this release; the Dockerfile at the
// repository root builds it.
var DefaultImage = "ghcr.io/dovetail-sh/dovetail-controller:v0.1.0"

// Values are the settings of an installation. The Terraform provider's
// dovetail_controller and `dovetail render` fill the same struct.
type Values struct {
	Name            string
	Namespace       string
	CreateNamespace bool
	ServiceAccount  string
	Image           string
	Replicas        int
	CPU, Memory     string
	// IRSARoleARN annotates the ServiceAccount for IAM Roles for Service Accounts;
	// with EKS Pod Identity it stays empty and an association names the account.
	IRSARoleARN string
	Settings    Settings
}

// Settings become the controller's environment (see controller/operator/options.go).
type Settings struct {
	ClusterName       string
	ClusterEndpoint   string
	AWSRegion         string
	InterruptionQueue string
	IsolatedVPC       bool
	FeatureGates      map[string]bool
	LogLevel          string
	BatchIdleDuration string
	BatchMaxDuration  string
	AWSEndpoints      map[string]string
	// NodeCosts price what a node costs beyond its instance, as decimal strings
	// (money is not a float to round-trip); only values other than the
	// controller's defaults are rendered.
	RootVolumePricePerGiBMonth string
	PublicIPv4PricePerHour     string
	NodeOverheadPricePerHour   string
	FewerNodesTolerance        string
}

// DefaultSettings are the controller's own defaults for the settings that have one.
func DefaultSettings() Settings {
	costs := scheduling.DefaultNodeCosts()
	decimal := func(f float64) string { return strconv.FormatFloat(math.Round(f*1e9)/1e9, 'f', -1, 64) }
	return Settings{LogLevel: "info", BatchIdleDuration: "1s", BatchMaxDuration: "10s",
		RootVolumePricePerGiBMonth: decimal(costs.RootVolumePerGiBHour * 730), PublicIPv4PricePerHour: decimal(costs.PublicIPv4PerHour),
		NodeOverheadPricePerHour: decimal(costs.PerNodeHour), FewerNodesTolerance: decimal(costs.FewerNodesTolerance)}
}

// DefaultValues are the values nothing overrides.
func DefaultValues() Values {
	return Values{Name: "dovetail", Namespace: "dovetail", CreateNamespace: true, ServiceAccount: "dovetail",
		Image: DefaultImage, Replicas: 2, CPU: "1", Memory: "1Gi",
		Settings: DefaultSettings()}
}

type envVar struct{ Name, Value string }

// env lists the settings as the environment variables the controller reads.
func (s Settings) env() []envVar {
	out := []envVar{{"CLUSTER_NAME", s.ClusterName}}
	add := func(name, value string) {
		if value != "" {
			out = append(out, envVar{name, value})
		}
	}
	add("CLUSTER_ENDPOINT", s.ClusterEndpoint)
	add("AWS_REGION", s.AWSRegion)
	add("INTERRUPTION_QUEUE", s.InterruptionQueue)
	if s.IsolatedVPC {
		add("ISOLATED_VPC", "true")
	}
	add("FEATURE_GATES", joinSorted(s.FeatureGates, strconv.FormatBool))
	add("LOG_LEVEL", s.LogLevel)
	add("BATCH_IDLE_DURATION", s.BatchIdleDuration)
	add("BATCH_MAX_DURATION", s.BatchMaxDuration)
	add("AWS_ENDPOINTS", joinSorted(s.AWSEndpoints, func(v string) string { return v }))
	d := DefaultSettings()
	for _, c := range []struct{ name, value, is string }{
		{"ROOT_VOLUME_PRICE_PER_GIB_MONTH", s.RootVolumePricePerGiBMonth, d.RootVolumePricePerGiBMonth},
		{"PUBLIC_IPV4_PRICE_PER_HOUR", s.PublicIPv4PricePerHour, d.PublicIPv4PricePerHour},
		{"NODE_OVERHEAD_PRICE_PER_HOUR", s.NodeOverheadPricePerHour, d.NodeOverheadPricePerHour},
		{"FEWER_NODES_TOLERANCE", s.FewerNodesTolerance, d.FewerNodesTolerance},
	} {
		if c.value != "" && !sameNumber(c.value, c.is) {
			out = append(out, envVar{c.name, c.value})
		}
	}
	return out
}

// sameNumber reports whether two decimal strings are the same number ("0.0500" is
// "0.05").
func sameNumber(a, b string) bool {
	x, errA := strconv.ParseFloat(a, 64)
	y, errB := strconv.ParseFloat(b, 64)
	return errA == nil && errB == nil && x == y
}

func joinSorted[V any](m map[string]V, format func(V) string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, k+"="+format(m[k]))
	}
	return strings.Join(parts, ",")
}

// Validate names the setting that is wrong and how to fix it.
func (v Values) Validate() error {
	var errs []string
	if v.Settings.ClusterName == "" {
		errs = append(errs, "cluster name is required: the controller tags and finds its instances by it")
	}
	if v.Replicas < 1 {
		errs = append(errs, "replicas must be at least 1 (2 keeps a standby leader)")
	}
	for _, s := range []struct{ name, value string }{{"name", v.Name}, {"namespace", v.Namespace}, {"service account", v.ServiceAccount}, {"image", v.Image}} {
		if s.value == "" {
			errs = append(errs, s.name+" must not be empty")
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Manifests renders the controller's objects (everything but the CRDs) in apply order.
func Manifests(v Values) ([]*unstructured.Unstructured, error) {
	return render(v, "controller")
}

// KwokProviderManifests are the RBAC objects the kwok cloud provider needs on top of
// Manifests (it creates Nodes and writes their status, as a kubelet would). Kept out
// of Manifests so that no production install can create Nodes.
func KwokProviderManifests(v Values) ([]*unstructured.Unstructured, error) {
	return render(v, "kwok-provider")
}

// RBACManifests are the objects of Manifests that give the controller its
// permissions: the namespace, ServiceAccount, roles and bindings, without the
// Deployment. Tests run the controller as that ServiceAccount with them.
func RBACManifests(v Values) ([]*unstructured.Unstructured, error) {
	objs, err := Manifests(v)
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, obj := range objs {
		switch obj.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
			out = append(out, obj)
		}
	}
	return out, nil
}

func render(v Values, name string) ([]*unstructured.Unstructured, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := template.New("controller").Funcs(template.FuncMap{"quote": strconv.Quote}).Parse(controllerTemplate)
	if err == nil {
		_, err = tmpl.New("kwok-provider").Parse(kwokProviderTemplate)
	}
	if err != nil {
		return nil, fmt.Errorf("parsing the controller templates, %w", err)
	}
	data := struct {
		Values
		Env []envVar
	}{v, v.Settings.env()}
	var buf bytes.Buffer
	if err := tmpl.ExecuteTemplate(&buf, name, data); err != nil {
		return nil, fmt.Errorf("rendering the %s template, %w", name, err)
	}
	return decodeAll(buf.Bytes())
}

func decodeAll(raw []byte) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(raw)))
	var out []*unstructured.Unstructured
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("splitting the rendered manifests, %w", err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		raw, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decoding a rendered manifest, %w\n%s", err, doc)
		}
		if string(raw) == "null" {
			continue
		}
		// Unstructured's own decoder keeps integers as int64, as the API server's do.
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decoding a rendered manifest, %w\n%s", err, doc)
		}
		out = append(out, obj)
	}
}

// CRDObjects are the CRDs as unstructured objects, ready to apply.
func CRDObjects() ([]*unstructured.Unstructured, error) {
	files, err := CRDYAML()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	var out []*unstructured.Unstructured
	for _, n := range names {
		objs, err := decodeAll(files[n])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Render writes everything an installation applies, CRDs first, as one YAML stream
// for GitOps tools.
func Render(w io.Writer, v Values) error {
	crds, err := CRDObjects()
	if err != nil {
		return err
	}
	objs, err := Manifests(v)
	if err != nil {
		return err
	}
	for i, obj := range append(crds, objs...) {
		raw, err := yaml.Marshal(obj.Object)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(raw); err != nil {
			return err
		}
	}
	return nil
}
