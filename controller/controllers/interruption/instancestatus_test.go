package interruption

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// statusEC2 answers DescribeInstanceStatus as EC2 does: each filter set gets the
// statuses that match it (the same instance may match several).
type statusEC2 struct {
	statuses []ec2types.InstanceStatus
	calls    int
}

func (s *statusEC2) DescribeInstanceStatus(_ context.Context, in *ec2.DescribeInstanceStatusInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error) {
	s.calls++
	f := in.Filters[0]
	var out []ec2types.InstanceStatus
	for _, st := range s.statuses {
		switch aws.ToString(f.Name) {
		case "instance-status.status":
			if st.InstanceStatus != nil && st.InstanceStatus.Status == ec2types.SummaryStatusImpaired {
				out = append(out, st)
			}
		case "system-status.status":
			if st.SystemStatus != nil && st.SystemStatus.Status == ec2types.SummaryStatusImpaired {
				out = append(out, st)
			}
		case "event.code":
			if len(st.Events) > 0 {
				out = append(out, st)
			}
		}
	}
	return &ec2.DescribeInstanceStatusOutput{InstanceStatuses: out}, nil
}

func impaired(since time.Time) *ec2types.InstanceStatusSummary {
	return &ec2types.InstanceStatusSummary{Status: ec2types.SummaryStatusImpaired,
		Details: []ec2types.InstanceStatusDetails{{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: aws.Time(since)}}}
}

func claimOf(instance string) *v1.NodeClaim {
	return &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "claim-" + instance, UID: types.UID(instance), Finalizers: []string{v1.TerminationFinalizer},
		Labels: map[string]string{v1.LabelNodePool: "default", v1.LabelCapacityType: v1.CapacityTypeOnDemand}},
		Status: v1.NodeClaimStatus{ProviderID: "aws:///us-west-2a/" + instance}}
}

// EC2's instance status is acted on as Karpenter acts on it: an instance whose
// status check has failed for two minutes is terminated at once (no drain time),
// one with a scheduled event is drained ahead of it, one whose check failed only
// moments ago or whose only failure is an EBS volume's is left alone, and each
// unhealthy instance is counted once while EC2 keeps reporting it.
func TestInstanceStatusReplacesUnhealthyInstances(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC))
	now := clk.Now()
	api := &statusEC2{statuses: []ec2types.InstanceStatus{
		{InstanceId: aws.String("i-sick"), InstanceStatus: impaired(now.Add(-5 * time.Minute))},
		{InstanceId: aws.String("i-host"), SystemStatus: impaired(now.Add(-3 * time.Minute))},
		{InstanceId: aws.String("i-blip"), InstanceStatus: impaired(now.Add(-30 * time.Second))},
		{InstanceId: aws.String("i-retiring"), Events: []ec2types.InstanceStatusEvent{{Code: ec2types.EventCodeInstanceRetirement, NotBefore: aws.Time(now.Add(48 * time.Hour))}}},
		{InstanceId: aws.String("i-ebs"), AttachedEbsStatus: &ec2types.EbsStatusSummary{Status: ec2types.SummaryStatusImpaired,
			Details: []ec2types.EbsStatusDetails{{Name: ec2types.StatusNameReachability, Status: ec2types.StatusTypeFailed, ImpairedSince: aws.Time(now.Add(-time.Hour))}}}},
		{InstanceId: aws.String("i-not-ours"), InstanceStatus: impaired(now.Add(-time.Hour))},
	}}
	var objs []client.Object
	for _, id := range []string{"i-sick", "i-host", "i-blip", "i-retiring", "i-ebs"} {
		objs = append(objs, claimOf(id))
	}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithStatusSubresource(&v1.NodeClaim{}).WithObjects(objs...).Build()
	recorder := record.NewFakeRecorder(100)
	s := NewInstanceStatus(NewController(kube, nil, "", nil, nil, recorder, clk), api)
	unhealthy := func(category statusCategory) float64 {
		return testutil.ToFloat64(metrics.InterruptionInstanceStatusUnhealthy.WithLabelValues(string(category)))
	}
	beforeInstance, beforeSystem, beforeEvent := unhealthy(categoryInstanceStatus), unhealthy(categorySystemStatus), unhealthy(categoryEventStatus)

	if err := s.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if api.calls != 3 {
		t.Errorf("%d DescribeInstanceStatus calls, want 3 (impaired instance checks, impaired system checks, scheduled events)", api.calls)
	}
	get := func(id string) *v1.NodeClaim {
		nc := &v1.NodeClaim{}
		if err := kube.Get(context.Background(), client.ObjectKey{Name: "claim-" + id}, nc); err != nil {
			t.Fatal(err)
		}
		return nc
	}
	for _, id := range []string{"i-sick", "i-host"} {
		nc := get(id)
		if nc.DeletionTimestamp == nil || nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] != now.Format(time.RFC3339) {
			t.Errorf("%s failing its status checks: deleting %v, termination timestamp %q; want deleted with no drain time (%s)",
				id, nc.DeletionTimestamp != nil, nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey], now.Format(time.RFC3339))
		}
	}
	if nc := get("i-retiring"); nc.DeletionTimestamp == nil || nc.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] != "" {
		t.Errorf("i-retiring with a scheduled retirement: deleting %v, annotations %v; want drained as usual", nc.DeletionTimestamp != nil, nc.Annotations)
	}
	for _, id := range []string{"i-blip", "i-ebs"} {
		if nc := get(id); nc.DeletionTimestamp != nil {
			t.Errorf("%s is deleted; a check failing for under %s, or an EBS volume's, is not acted on", id, UnhealthyThreshold)
		}
	}
	if d := unhealthy(categoryInstanceStatus) - beforeInstance; d != 1 {
		t.Errorf("InstanceStatus unhealthy count rose by %v, want 1 (i-sick; i-not-ours has no claim)", d)
	}
	if d := unhealthy(categorySystemStatus) - beforeSystem; d != 1 {
		t.Errorf("SystemStatus unhealthy count rose by %v, want 1", d)
	}
	if d := unhealthy(categoryEventStatus) - beforeEvent; d != 1 {
		t.Errorf("EventStatus unhealthy count rose by %v, want 1", d)
	}
	close(recorder.Events)
	warned := 0
	for e := range recorder.Events {
		if strings.HasPrefix(e, "Warning InstanceUnhealthy") {
			warned++
		}
	}
	if warned != 3 {
		t.Errorf("%d InstanceUnhealthy warnings, want one per claim acted on (3)", warned)
	}

	// A minute later the same instances are still reported: nothing is counted
	// twice; the short failure has now lasted long enough.
	clk.Step(time.Minute + 30*time.Second)
	s.recorder = record.NewFakeRecorder(100)
	if err := s.Poll(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := unhealthy(categoryInstanceStatus) - beforeInstance; d != 2 {
		t.Errorf("InstanceStatus unhealthy count rose by %v in all, want 2 (i-sick once, then i-blip)", d)
	}
	if nc := get("i-blip"); nc.DeletionTimestamp == nil {
		t.Errorf("i-blip, failing for %s, is not acted on", 2*time.Minute)
	}
}
