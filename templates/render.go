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
	"github.com/dovetail-sh/dovetail/templates/crds"
)

//go:embed manifests/kwok-provider.yaml.tmpl
var kwokProviderTemplate string

// ImageRepository is where releases publish the controller image.
var ImageRepository = mustImageRepository()

// DefaultImage is the controller image released with this binary (ImageRepository at
// the release's version); empty in a build from source, which must be given an image.
// The Dockerfile at the repository root builds it.
var DefaultImage = releaseImage()

// NoImage says why a build from source needs an image and which to give it.
var NoImage = "this build of Dovetail is not a release, so it has no controller image of its own: " +
	"set the image you built from the repository's Dockerfile or mirrored (a release deploys " + ImageRepository + ":<its version> unless told otherwise)"

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
	// ExtraChartValues are further values of charts/dovetail, named as in its values.yaml
	// (tolerations, nodeSelector, serviceMonitor, ...), merged over those the fields
	// above set.
	ExtraChartValues map[string]any
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

// Validate names the setting that is wrong and how to fix it.
func (v Values) Validate() error {
	var errs []string
	if v.Settings.ClusterName == "" {
		errs = append(errs, "cluster name is required: the controller tags and finds its instances by it")
	}
	if v.Replicas < 1 {
		errs = append(errs, "replicas must be at least 1 (2 keeps a standby leader)")
	}
	if v.Image == "" {
		if DefaultImage == "" {
			errs = append(errs, "image is required: "+NoImage)
		} else {
			errs = append(errs, "image must not be empty (the release's is "+DefaultImage+")")
		}
	} else if _, tag, digest := splitImage(v.Image); tag == "" && digest == "" {
		errs = append(errs, fmt.Sprintf("image %q names no tag or digest: name the build to run, such as %s:v1.2.3 (a tag) or %s@sha256:... (a digest)", v.Image, v.Image, v.Image))
	}
	for _, s := range []struct{ name, value string }{{"name", v.Name}, {"namespace", v.Namespace}, {"service account", v.ServiceAccount}} {
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
	if err := v.Validate(); err != nil {
		return nil, err
	}
	return renderChart(v)
}

// KwokProviderManifests are the RBAC objects the kwok cloud provider needs on top of
// Manifests (it creates Nodes and writes their status, as a kubelet would). Kept out
// of Manifests so that no production install can create Nodes.
func KwokProviderManifests(v Values) ([]*unstructured.Unstructured, error) {
	return renderKwokProvider(v)
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

// renderKwokProvider fills the kwok provider's RBAC template, which is not part of the
// chart: no install made from it may create Nodes.
func renderKwokProvider(v Values) ([]*unstructured.Unstructured, error) {
	if err := v.Validate(); err != nil {
		return nil, err
	}
	tmpl, err := template.New("kwok-provider").Parse(kwokProviderTemplate)
	if err != nil {
		return nil, fmt.Errorf("parsing the kwok provider template, %w", err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, v); err != nil {
		return nil, fmt.Errorf("rendering the kwok provider template, %w", err)
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
	files, err := crds.CRDYAML()
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
