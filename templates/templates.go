// Package templates renders what Dovetail installs into a cluster from the Helm chart
// (charts/dovetail): the CRDs, generated into the chart by `make generate` from
// controller/apis, and the controller's RBAC, Deployment, Service and PDB. The
// Terraform provider, `dovetail render` and Helm read the same files, so the ways of
// installing cannot drift apart.
package templates

import (
	"fmt"
	"io/fs"
	"sort"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/charts"
)

// crdFiles are the chart's crds/ directory, so Helm installs the same CRDs.
var crdFiles, _ = fs.Sub(charts.Dovetail, charts.DovetailRoot)

// CRDs returns the CustomResourceDefinitions Dovetail serves, in a stable order.
func CRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs, %w", err)
	}
	sort.Strings(names)
	crds := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		raw, err := fs.ReadFile(crdFiles, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s, %w", name, err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("decoding %s, %w", name, err)
		}
		crds = append(crds, crd)
	}
	return crds, nil
}

// CRDYAML returns the raw CRD manifests, keyed by file name.
func CRDYAML() (map[string][]byte, error) {
	names, err := fs.Glob(crdFiles, "crds/*.yaml")
	if err != nil {
		return nil, fmt.Errorf("listing embedded CRDs, %w", err)
	}
	out := map[string][]byte{}
	for _, name := range names {
		raw, err := fs.ReadFile(crdFiles, name)
		if err != nil {
			return nil, fmt.Errorf("reading %s, %w", name, err)
		}
		out[name] = raw
	}
	return out, nil
}
