package provider

import (
	"context"
	"fmt"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/schema/validator"
	"github.com/hashicorp/terraform-plugin-framework/types"
	"helm.sh/helm/v3/pkg/chartutil"
	"sigs.k8s.io/yaml"
)

// managedChartValues are the chart values dovetail_controller's own attributes set;
// a values document may not set them too, so each thing has one place.
var managedChartValues = []struct{ path, attribute string }{
	{"fullnameOverride", "name"},
	{"createNamespace", "create_namespace"},
	{"managedBy", "(none: the provider sets it)"},
	{"replicas", "replicas"},
	{"logLevel", "log_level"},
	// Karpenter's other settings (vmMemoryOverheadPercent, reservedENIs,
	// clusterCABundle, ...) have no attribute: values set them.
	{"settings.clusterName", "cluster_name"},
	{"settings.clusterEndpoint", "cluster_endpoint"},
	{"settings.awsRegion", "aws_region"},
	{"settings.interruptionQueue", "interruption_queue"},
	{"settings.isolatedVPC", "isolated_vpc"},
	{"settings.featureGates", "feature_gates"},
	{"settings.batchIdleDuration", "batch_idle_duration"},
	{"settings.batchMaxDuration", "batch_max_duration"},
	{"settings.awsEndpoints", "aws_endpoints"},
	{"settings.nodeCosts", "root_volume_price_per_gib_month, public_ipv4_price_per_hour, node_overhead_price_per_hour and fewer_nodes_tolerance"},
	{"controller.image", "image"},
	{"controller.resources", "cpu and memory"},
	{"serviceAccount.name", "service_account"},
	{"serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn", "irsa_role_arn"},
}

// parseChartValues reads one values document: a YAML mapping of chart values.
func parseChartValues(doc string) (map[string]any, error) {
	vals := map[string]any{}
	if err := yaml.Unmarshal([]byte(doc), &vals); err != nil {
		return nil, fmt.Errorf("not a YAML mapping of chart values: %w", err)
	}
	for _, m := range managedChartValues {
		if has(vals, m.path) {
			return nil, fmt.Errorf("%s is set by this resource's %s attribute; set it there, not in values", strings.ReplaceAll(m.path, "\\", ""), m.attribute)
		}
	}
	return vals, nil
}

// has reports whether the dotted path (dots inside a key escaped as \.) is set.
func has(vals map[string]any, path string) bool {
	var keys []string
	cur := ""
	for i := 0; i < len(path); i++ {
		switch {
		case path[i] == '\\' && i+1 < len(path):
			cur += string(path[i+1])
			i++
		case path[i] == '.':
			keys, cur = append(keys, cur), ""
		default:
			cur += string(path[i])
		}
	}
	keys = append(keys, cur)
	var node any = vals
	for _, k := range keys {
		m, ok := node.(map[string]any)
		if !ok {
			return false
		}
		if node, ok = m[k]; !ok {
			return false
		}
	}
	return true
}

// chartValues merges the values documents, later ones winning as in Helm.
func chartValues(l types.List) (map[string]any, error) {
	var out map[string]any
	for i, v := range l.Elements() {
		s, ok := v.(types.String)
		if !ok || s.IsNull() || s.IsUnknown() {
			continue
		}
		vals, err := parseChartValues(s.ValueString())
		if err != nil {
			return nil, fmt.Errorf("values[%d]: %w", i, err)
		}
		out = chartutil.CoalesceTables(vals, out)
	}
	return out, nil
}

// chartValuesDocument checks a values document at plan time.
type chartValuesDocument struct{}

func (chartValuesDocument) Description(context.Context) string {
	return "a YAML mapping of charts/dovetail values, not setting what this resource's attributes set"
}

func (v chartValuesDocument) MarkdownDescription(ctx context.Context) string {
	return v.Description(ctx)
}

func (chartValuesDocument) ValidateString(_ context.Context, req validator.StringRequest, resp *validator.StringResponse) {
	if req.ConfigValue.IsNull() || req.ConfigValue.IsUnknown() {
		return
	}
	if _, err := parseChartValues(req.ConfigValue.ValueString()); err != nil {
		resp.Diagnostics.AddAttributeError(req.Path, "Invalid chart values", err.Error())
	}
}
