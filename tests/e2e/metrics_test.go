package e2e

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/common/expfmt"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	cpmetrics "github.com/dovetail-sh/dovetail/controller/cloudprovider/metrics"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// karpenterMetrics are Karpenter v1.15 metric names Dovetail serves, with labels each
// must carry, as a run that launched, interrupted and drained nodes leaves them.
// (TestMetricsAreKarpenters in controller/operator checks every name's exact type and
// label set; this checks the series a real run produces.)
var karpenterMetrics = map[string][]string{
	"karpenter_nodeclaims_created_total":                                  {"reason", "nodepool", "min_values_relaxed"},
	"karpenter_nodeclaims_terminated_total":                               {"nodepool", "capacity_type", "zone"},
	"karpenter_nodeclaims_termination_duration_seconds":                   {"nodepool"},
	"karpenter_nodeclaims_instance_termination_duration_seconds":          {"nodepool"},
	"karpenter_nodeclaims_disrupted_total":                                {"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"},
	"karpenter_nodes_allocatable":                                         {"node_name", "nodepool", "resource_type", "instance_type", "capacity_type", "zone", "arch", "phase", "managed"},
	"karpenter_nodes_total_pod_requests":                                  {"node_name", "nodepool", "resource_type"},
	"karpenter_nodes_total_pod_limits":                                    {"node_name", "nodepool", "resource_type"},
	"karpenter_nodes_system_overhead":                                     {"node_name", "nodepool", "resource_type"},
	"karpenter_pods_state":                                                {"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "phase", "ready", "managed"},
	"karpenter_pods_drained_total":                                        {"reason"},
	"karpenter_pods_eviction_requests_total":                              {"code"},
	"karpenter_pods_scheduling_decision_duration_seconds":                 {},
	"karpenter_nodepools_usage":                                           {"nodepool", "resource_type"},
	"karpenter_nodepools_cost_total":                                      {"nodepool"},
	"karpenter_nodepools_allowed_disruptions":                             {"nodepool", "reason"},
	"karpenter_nodepools_nodes_consuming_budgets":                         {"nodepool", "reason"},
	"karpenter_voluntary_disruption_eligible_nodes":                       {"reason"},
	"karpenter_voluntary_disruption_consolidation_timeouts_total":         {"consolidation_type"},
	"karpenter_interruption_received_messages_total":                      {"message_type"},
	"karpenter_interruption_message_queue_duration_seconds":               {},
	"karpenter_cloudprovider_duration_seconds":                            {"controller", "method", "provider"},
	"karpenter_cloudprovider_instance_type_offering_available":            {"instance_type", "capacity_type", "zone"},
	"karpenter_cloudprovider_instance_type_offering_price_estimate":       {"instance_type", "capacity_type", "zone"},
	"karpenter_cloudprovider_instance_type_cpu_cores":                     {"instance_type"},
	"karpenter_cloudprovider_instance_type_memory_bytes":                  {"instance_type"},
	"karpenter_nodes_drained_total":                                       {"nodepool"},
	"karpenter_nodes_current_lifetime_seconds":                            {"node_name", "nodepool", "instance_type", "capacity_type", "zone", "arch", "phase", "managed"},
	"karpenter_cluster_utilization_percent":                               {"resource_type"},
	"karpenter_nodes_created_total":                                       {"nodepool", "zone"},
	"karpenter_nodes_terminated_total":                                    {"nodepool", "zone"},
	"karpenter_nodes_termination_duration_seconds":                        {"nodepool"},
	"karpenter_nodes_lifetime_duration_seconds":                           {"nodepool"},
	"karpenter_pods_startup_duration_seconds":                             {},
	"karpenter_voluntary_disruption_decision_evaluation_duration_seconds": {"reason", "consolidation_type"},
	"karpenter_cluster_state_unsynced_time_seconds":                       {},
	"karpenter_scheduler_scheduling_duration_seconds":                     {"controller"},
	"karpenter_scheduler_unschedulable_pods_count":                        {"controller"},
	"karpenter_scheduler_ignored_pods_count":                              {},
	"karpenter_cluster_state_node_count":                                  {},
	"karpenter_cluster_state_synced":                                      {},
	"karpenter_build_info":                                                {"version", "goversion", "goarch", "commit"},
}

// checkKarpenterMetrics scrapes what the controller's /metrics endpoint serves (the
// controller-runtime registry, over HTTP) and checks every name above with its
// labels; then checks that every metric the shipped Grafana dashboard queries is one
// the controller serves or registers.
func checkKarpenterMetrics(t *testing.T) {
	t.Helper()
	srv := httptest.NewServer(promhttp.HandlerFor(crmetrics.Registry, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	must(t, err)
	defer resp.Body.Close()
	var parser expfmt.TextParser
	families, err := parser.TextToMetricFamilies(resp.Body)
	must(t, err)
	for name, labels := range karpenterMetrics {
		f, ok := families[name]
		if !ok || len(f.Metric) == 0 {
			t.Errorf("/metrics serves no %s", name)
			continue
		}
		have := map[string]bool{}
		for _, l := range f.Metric[0].Label {
			have[l.GetName()] = true
		}
		for _, l := range labels {
			if !have[l] {
				t.Errorf("%s has no label %s (labels: %v)", name, l, f.Metric[0].Label)
			}
		}
	}

	known := map[string]bool{}
	for n := range families {
		known[n] = true
	}
	descs := make(chan *prometheus.Desc, 100)
	go func() {
		for _, c := range append(append([]prometheus.Collector{&metrics.ClusterCollector{}}, metrics.Static...), cpmetrics.Collectors...) {
			c.Describe(descs)
		}
		close(descs)
	}()
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			known[m[1]] = true
		}
	}
	raw, err := os.ReadFile("../../dashboards/dovetail.json")
	must(t, err)
	var dash struct {
		Panels []struct {
			Title   string
			Targets []struct{ Expr string }
		}
	}
	must(t, json.Unmarshal(raw, &dash))
	used := regexp.MustCompile(`karpenter_[a-z_]+`)
	for _, p := range dash.Panels {
		for _, target := range p.Targets {
			for _, name := range used.FindAllString(target.Expr, -1) {
				base := strings.TrimSuffix(strings.TrimSuffix(strings.TrimSuffix(name, "_bucket"), "_sum"), "_count")
				if !known[name] && !known[base] {
					t.Errorf("dashboard panel %q queries %s, which the controller does not serve", p.Title, name)
				}
			}
		}
	}
}
