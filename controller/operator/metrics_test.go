package operator_test

import (
	"context"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	awscp "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	cpfake "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	cpmetrics "github.com/dovetail-sh/dovetail/controller/cloudprovider/metrics"
	"github.com/dovetail-sh/dovetail/controller/metrics"
	_ "github.com/dovetail-sh/dovetail/controller/operator"
)

// nodeLabels are the 36 node-label metric labels of Karpenter v1.14's karpenter_nodes_*
// gauges (v1.WellKnownLabels of core and the AWS provider).
var nodeLabels = strings.Fields(`arch capacity_reservation_id capacity_reservation_interruptible capacity_reservation_type capacity_type
	instance_accelerator_count instance_accelerator_manufacturer instance_accelerator_name instance_capability_flex instance_category
	instance_cpu instance_cpu_manufacturer instance_cpu_sustained_clock_speed_mhz instance_ebs_bandwidth instance_encryption_in_transit_supported
	instance_family instance_generation instance_gpu_count instance_gpu_manufacturer instance_gpu_memory instance_gpu_name instance_hypervisor
	instance_local_nvme instance_memory instance_network_bandwidth instance_size instance_tenancy instance_type nodepool os placement_group_id
	placement_group_partition region windows_build zone zone_id`)

func nodeGauge(extra ...string) []string {
	return append(append(slices.Clone(nodeLabels), "node_name", "phase", "managed"), extra...)
}

type karpenterMetric struct {
	kind   dto.MetricType
	labels []string
}

var (
	counter   = dto.MetricType_COUNTER
	gauge     = dto.MetricType_GAUGE
	histogram = dto.MetricType_HISTOGRAM
	summary   = dto.MetricType_SUMMARY
)

// karpenterV115 is every karpenter_* metric of Karpenter v1.14's reference
// (website/content/en/v1.14/reference/metrics.md of aws/karpenter-provider-aws), with
// its type and labels as Karpenter v1.14.0 registers them (the page names neither),
// brought to v1.15.0: the metrics and labels it added, read from the declarations in
// sigs.k8s.io/karpenter@v1.15.0 (pkg/metrics, pkg/controllers/...).
var karpenterV115 = map[string]karpenterMetric{
	"karpenter_consolidation_score":                                       {histogram, []string{"decision", "nodepool", "policy"}},
	"karpenter_consolidation_moves_total":                                 {counter, []string{"decision", "nodepool", "policy"}},
	"karpenter_build_info":                                                {gauge, []string{"version", "goversion", "goarch", "commit"}},
	"karpenter_nodeclaims_unhealthy_disrupted_total":                      {counter, []string{"condition", "nodepool", "capacity_type", "image_id", "termination_mode"}},
	"karpenter_nodeclaims_termination_duration_seconds":                   {histogram, []string{"nodepool"}},
	"karpenter_nodeclaims_terminated_total":                               {counter, []string{"nodepool", "capacity_type", "zone"}},
	"karpenter_nodeclaims_instance_termination_duration_seconds":          {histogram, []string{"nodepool"}},
	"karpenter_nodeclaims_disrupted_total":                                {counter, []string{"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"}},
	"karpenter_pods_disruption_initiated_total":                           {counter, []string{"reason", "nodepool", "capacity_type", "consolidation_policy", "termination_mode"}},
	"karpenter_nodes_reboots_total":                                       {counter, []string{"result"}},
	"karpenter_nodes_reboot_duration_seconds":                             {histogram, []string{"result"}},
	"karpenter_nodes_reboot_recovery_duration_seconds":                    {histogram, nil},
	"karpenter_voluntary_disruption_terminate_first_decisions_total":      {counter, []string{"nodepool", "reason", "terminate_first_reason"}},
	"karpenter_pod_deletion_cost_nodes_with_pending_annotation_writes":    {gauge, []string{"nodepool"}},
	"karpenter_pod_deletion_cost_pod_annotation_writes_total":             {counter, []string{"result"}},
	"karpenter_nodeclaims_created_total":                                  {counter, []string{"reason", "nodepool", "min_values_relaxed"}},
	"karpenter_nodes_total_pod_requests":                                  {gauge, nodeGauge("resource_type")},
	"karpenter_nodes_total_pod_limits":                                    {gauge, nodeGauge("resource_type")},
	"karpenter_nodes_total_daemon_requests":                               {gauge, nodeGauge("resource_type")},
	"karpenter_nodes_total_daemon_limits":                                 {gauge, nodeGauge("resource_type")},
	"karpenter_nodes_termination_duration_seconds":                        {summary, []string{"nodepool"}},
	"karpenter_nodes_terminated_total":                                    {counter, []string{"nodepool", "zone"}},
	"karpenter_nodes_system_overhead":                                     {gauge, nodeGauge("resource_type")},
	"karpenter_nodes_lifetime_duration_seconds":                           {histogram, []string{"nodepool"}},
	"karpenter_nodes_drained_total":                                       {counter, []string{"nodepool"}},
	"karpenter_nodes_current_lifetime_seconds":                            {gauge, nodeGauge()},
	"karpenter_nodes_created_total":                                       {counter, []string{"nodepool", "zone"}},
	"karpenter_nodes_allocatable":                                         {gauge, nodeGauge("resource_type")},
	"karpenter_pods_unstarted_time_seconds":                               {gauge, []string{"name", "namespace"}},
	"karpenter_pods_unbound_time_seconds":                                 {gauge, []string{"name", "namespace", "dynamic_resources"}},
	"karpenter_pods_state":                                                {gauge, []string{"name", "namespace", "owner", "node", "scheduled", "nodepool", "zone", "arch", "capacity_type", "instance_type", "phase", "ready", "managed"}},
	"karpenter_pods_startup_duration_seconds":                             {summary, nil},
	"karpenter_pods_scheduling_decision_duration_seconds":                 {histogram, nil},
	"karpenter_pods_provisioning_unstarted_time_seconds":                  {gauge, []string{"name", "namespace"}},
	"karpenter_pods_provisioning_unbound_time_seconds":                    {gauge, []string{"name", "namespace", "dynamic_resources"}},
	"karpenter_pods_provisioning_startup_duration_seconds":                {histogram, nil},
	"karpenter_pods_provisioning_scheduling_undecided_time_seconds":       {gauge, []string{"name", "namespace"}},
	"karpenter_pods_provisioning_bound_duration_seconds":                  {histogram, []string{"dynamic_resources"}},
	"karpenter_pods_eviction_requests_total":                              {counter, []string{"code"}},
	"karpenter_pods_drained_total":                                        {counter, []string{"reason"}},
	"karpenter_pods_bound_duration_seconds":                               {histogram, []string{"dynamic_resources"}},
	"karpenter_voluntary_disruption_queue_failures_total":                 {counter, []string{"decision", "reason", "consolidation_type"}},
	"karpenter_voluntary_disruption_failed_validations_total":             {counter, []string{"consolidation_type"}},
	"karpenter_voluntary_disruption_eligible_nodes":                       {gauge, []string{"reason"}},
	"karpenter_voluntary_disruption_decisions_total":                      {counter, []string{"decision", "reason", "consolidation_type"}},
	"karpenter_voluntary_disruption_decisions_by_nodepool_total":          {counter, []string{"nodepool", "decision", "reason", "consolidation_type"}},
	"karpenter_voluntary_disruption_decision_evaluation_duration_seconds": {histogram, []string{"reason", "consolidation_type"}},
	"karpenter_voluntary_disruption_consolidation_timeouts_total":         {counter, []string{"consolidation_type"}},
	"karpenter_scheduler_unschedulable_pods_count":                        {gauge, []string{"controller"}},
	"karpenter_scheduler_unfinished_work_seconds":                         {gauge, []string{"controller", "scheduling_id"}},
	"karpenter_scheduler_scheduling_duration_seconds":                     {histogram, []string{"controller"}},
	"karpenter_scheduler_queue_depth":                                     {gauge, []string{"controller", "scheduling_id"}},
	"karpenter_scheduler_pending_pods_by_effective_zone_count":            {gauge, []string{"controller", "zone"}},
	"karpenter_scheduler_ignored_pods_count":                              {gauge, nil},
	"karpenter_nodepools_usage":                                           {gauge, []string{"resource_type", "nodepool"}},
	"karpenter_nodepools_nodes_consuming_budgets":                         {gauge, []string{"nodepool", "reason"}},
	"karpenter_nodepools_limit":                                           {gauge, []string{"resource_type", "nodepool"}},
	"karpenter_nodepools_cost_tracker_errors_total":                       {counter, []string{"nodepool"}},
	"karpenter_nodepools_cost_total":                                      {gauge, []string{"nodepool"}},
	"karpenter_nodepools_allowed_disruptions":                             {gauge, []string{"nodepool", "reason"}},
	"karpenter_interruption_received_messages_total":                      {counter, []string{"message_type"}},
	"karpenter_interruption_message_queue_duration_seconds":               {histogram, nil},
	"karpenter_interruption_instance_status_unhealthy_total":              {counter, []string{"category"}},
	"karpenter_interruption_deleted_messages_total":                       {counter, nil},
	"karpenter_cluster_utilization_percent":                               {gauge, []string{"resource_type"}},
	"karpenter_cluster_state_unsynced_time_seconds":                       {gauge, nil},
	"karpenter_cluster_state_synced":                                      {gauge, nil},
	"karpenter_cluster_state_node_count":                                  {gauge, nil},
	"karpenter_cloudprovider_instance_type_offering_price_estimate":       {gauge, []string{"instance_type", "capacity_type", "zone"}},
	"karpenter_cloudprovider_instance_type_offering_available":            {gauge, []string{"instance_type", "capacity_type", "zone"}},
	"karpenter_cloudprovider_instance_type_memory_bytes":                  {gauge, []string{"instance_type"}},
	"karpenter_cloudprovider_instance_type_cpu_cores":                     {gauge, []string{"instance_type"}},
	"karpenter_cloudprovider_instance_termination_failures_total":         {counter, []string{"zone", "zone_id"}},
	"karpenter_cloudprovider_instance_launch_failures_total":              {counter, []string{"zone", "zone_id", "capacity_type", "reason"}},
	"karpenter_cloudprovider_errors_total":                                {counter, []string{"controller", "method", "provider", "error", "nodepool"}},
	"karpenter_cloudprovider_duration_seconds":                            {histogram, []string{"controller", "method", "provider"}},
	"karpenter_cloudprovider_batcher_batch_time_seconds":                  {histogram, []string{"batcher"}},
	"karpenter_cloudprovider_batcher_batch_size":                          {histogram, []string{"batcher"}},
	// The AWS provider's (providers/launchtemplate/metrics.go), unchanged since v1.14.
	"karpenter_ec2nodeclasses_userdata_bytes": {gauge, []string{"nodeclass"}},
}

// notServed are Karpenter's metrics of features Dovetail does not have, each with why.
var notServed = map[string]string{
	"karpenter_pod_deletion_cost_nodes_with_pending_annotation_writes": "PodDeletionCostManagement is not implemented yet",
	"karpenter_pod_deletion_cost_pod_annotation_writes_total":          "PodDeletionCostManagement is not implemented yet",
	"karpenter_cloudprovider_batcher_batch_time_seconds":               "Dovetail does not batch cloud provider calls across NodeClaims",
	"karpenter_cloudprovider_batcher_batch_size":                       "Dovetail does not batch cloud provider calls across NodeClaims",
}

// served gathers every metric the controller registers: the collectors of its
// packages (their label names from Describe) and, for the types, one series of each,
// as a scrape of a cluster with a node and pods sees them.
func served(t *testing.T) map[string]karpenterMetric {
	t.Helper()
	out := map[string]karpenterMetric{}
	collectors := append(append([]prometheus.Collector{}, metrics.Static...), cpmetrics.Collectors...)
	collectors = append(collectors, awscp.InstanceTypeRefreshErrors, awscp.InstanceLaunchFailures, awscp.InstanceTerminationFailures, awscp.UserDataBytes)
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	cluster := &metrics.ClusterCollector{Reader: fakeCluster(t, clk.Now()), Clock: clk}
	collectors = append(collectors, cluster)
	descs := make(chan *prometheus.Desc, 1000)
	go func() {
		for _, c := range collectors {
			c.Describe(descs)
		}
		close(descs)
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	vars := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	for d := range descs {
		name := fq.FindStringSubmatch(d.String())
		labels := vars.FindStringSubmatch(d.String())
		if name == nil || labels == nil {
			t.Fatalf("cannot read %s", d.String())
		}
		var ls []string
		for _, l := range strings.Split(labels[1], ",") {
			if l = strings.TrimSpace(l); l != "" {
				ls = append(ls, l)
			}
		}
		out[name[1]] = karpenterMetric{kind: -1, labels: ls}
	}
	// Types: from one series of each, as scraped.
	registry := prometheus.NewPedanticRegistry()
	registry.MustRegister(collectors...)
	touchEverySeries()
	// A simulation running while scraped, and a pod the provisioner saw.
	simulation := metrics.StartSimulation(clk, "test", 1)
	defer simulation.Done()
	metrics.PodSeen("pending-uid", clk.Now().Add(-time.Minute))
	families, err := registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if m, ok := out[f.GetName()]; ok {
			m.kind = f.GetType()
			out[f.GetName()] = m
		}
	}
	return out
}

// touchEverySeries makes one series of each vector, as a run would, so its type is
// scraped; the values are not read.
func touchEverySeries() {
	for _, c := range append(append([]prometheus.Collector{}, metrics.Static...), cpmetrics.Collectors...) {
		switch v := c.(type) {
		case *prometheus.CounterVec:
			touch(v.MetricVec)
		case *prometheus.GaugeVec:
			touch(v.MetricVec)
		case *prometheus.HistogramVec:
			touch(v.MetricVec)
		case *prometheus.SummaryVec:
			touch(v.MetricVec)
		}
	}
	for _, v := range []*prometheus.CounterVec{awscp.InstanceLaunchFailures, awscp.InstanceTerminationFailures} {
		touch(v.MetricVec)
	}
	touch(awscp.UserDataBytes.MetricVec)
	// The instance type gauges are served from the lists the provider returned.
	clk := clocktesting.NewFakeClock(time.Now())
	provider := cpmetrics.Decorate(cpfake.New(clk, cpfake.InstanceType("m5.large", "2", "8Gi", "us-west-2a")), clk, "test")
	if _, err := provider.GetInstanceTypes(context.Background(), &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}); err != nil {
		panic(err)
	}
}

func touch(v *prometheus.MetricVec) {
	desc := make(chan *prometheus.Desc, 1)
	v.Describe(desc)
	d := (<-desc).String()
	labels := regexp.MustCompile(`variableLabels: \{([^}]*)\}`).FindStringSubmatch(d)
	n := 0
	if labels != nil && strings.TrimSpace(labels[1]) != "" {
		n = len(strings.Split(labels[1], ","))
	}
	values := make([]string, n)
	for i := range values {
		values[i] = "test"
	}
	_, _ = v.GetMetricWithLabelValues(values...)
}

func fakeCluster(t *testing.T, now time.Time) client.Reader {
	t.Helper()
	created := metav1.NewTime(now.Add(-time.Hour))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", CreationTimestamp: created, Labels: map[string]string{"karpenter.sh/nodepool": "default", "topology.kubernetes.io/zone": "us-west-2a"}},
		Status: corev1.NodeStatus{Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}, Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}}}
	running := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "running-uid", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Spec: corev1.PodSpec{NodeName: "n1"}, Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-50 * time.Second))},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.NewTime(now.Add(-40 * time.Second))}}}}
	pending := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "batch", Namespace: "default", UID: "pending-uid", CreationTimestamp: metav1.NewTime(now.Add(-time.Minute))},
		Status: corev1.PodStatus{Phase: corev1.PodPending}}
	return fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(node, running, pending).Build()
}

// TestMetricsAreKarpenters checks that every karpenter_* metric of Karpenter v1.15
// is served under its name, with its type and exactly its labels (a dashboard's
// `by (label)` and a recording rule's join break on any difference), except the
// features Dovetail lacks; and that Dovetail serves no karpenter_* name Karpenter
// v1.15 does not, so no dashboard is built on a name that will go.
func TestMetricsAreKarpenters(t *testing.T) {
	have := served(t)
	for name, want := range karpenterV115 {
		got, ok := have[name]
		if why, skip := notServed[name]; skip {
			if ok {
				t.Errorf("%s is served, but is listed as not served (%s)", name, why)
			}
			continue
		}
		if !ok {
			t.Errorf("%s is not served", name)
			continue
		}
		if got.kind != want.kind {
			t.Errorf("%s is a %v, Karpenter's a %v", name, got.kind, want.kind)
		}
		if a, b := slices.Sorted(slices.Values(got.labels)), slices.Sorted(slices.Values(want.labels)); !slices.Equal(a, b) {
			t.Errorf("%s has labels %v, Karpenter's %v", name, a, b)
		}
	}
	// Ours only, on purpose: listed with why.
	ours := map[string]string{
		"karpenter_cloudprovider_instance_type_refresh_errors_total": "failed instance type refreshes, while the last good list is served",
	}
	for name := range have {
		if _, ok := karpenterV115[name]; !ok && strings.HasPrefix(name, "karpenter_") && ours[name] == "" {
			t.Errorf("%s is not a Karpenter v1.15 metric", name)
		}
	}
}
