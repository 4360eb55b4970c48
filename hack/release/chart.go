package main

import (
	"fmt"
	"path/filepath"

	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
)

// chart packages charts/dovetail at the release version. Its default image is
// repository:appVersion, so appVersion is the image's tag.
func chart(o options) error {
	c, err := loader.LoadDir(filepath.Join(o.root, "charts", "dovetail"))
	if err != nil {
		return err
	}
	c.Metadata.Version, c.Metadata.AppVersion = o.version, "v"+o.version
	// The package keeps the chart's values.yaml as written: it must name the image
	// built here, with no tag of its own.
	found := false
	for _, f := range c.Raw {
		if f.Name == "values.yaml" {
			raw, err := chartutil.ReadValues(f.Data)
			if err != nil {
				return err
			}
			ctrl, _ := raw["controller"].(map[string]any)
			img, _ := ctrl["image"].(map[string]any)
			if img == nil || img["repository"] != o.imageRepository || img["tag"] != "" || img["digest"] != "" {
				return fmt.Errorf("the chart's values.yaml has controller.image %v; want repository %s with no tag or digest (the tag is appVersion)", img, o.imageRepository)
			}
			found = true
		}
	}
	if !found {
		return fmt.Errorf("the chart has no values.yaml")
	}
	_, err = chartutil.Save(c, o.dist)
	return err
}
