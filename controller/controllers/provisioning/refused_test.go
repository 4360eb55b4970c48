package provisioning

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	fakecloud "github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/controller/state"
)

// A pod whose volume Karpenter would not provision for gets no node, and its
// FailedScheduling event names the volume and why; a NodePool whose Ready condition
// is present and not True launches nothing.
func TestPodsThatCannotScheduleSayWhy(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")}}
	binding := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Name: "data", Namespace: "default"}, Spec: corev1.PersistentVolumeClaimSpec{VolumeName: "pv-a"}}
	pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: "pv-a"}}
	withVolume := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "default", UID: "db-uid"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: requests}},
			Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}}
	for _, tc := range []struct {
		name   string
		ready  metav1.ConditionStatus
		pod    *corev1.Pod
		claims int
		event  string
	}{
		{"a claim the binder has not marked bound", metav1.ConditionTrue, withVolume, 0, `Failed to schedule pod, volume "data": persistentvolumeclaim default/data names volume pv-a but has no pv.kubernetes.io/bind-completed annotation`},
		{"a pool that is not Ready", metav1.ConditionUnknown, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: requests}}}}, 0, "no NodePool can launch nodes"},
		{"a pool that is Ready", metav1.ConditionTrue, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", UID: "web-uid"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: requests}}}}, 1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "pool-uid"}}
			pool.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: tc.ready, Reason: "Test", LastTransitionTime: metav1.NewTime(clk.Now())}}
			kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(pool, binding, pv, tc.pod).WithStatusSubresource(pool).Build()
			cloud := fakecloud.New(clk, fakecloud.InstanceType("m.xlarge", "4", "16Gi", "zone-a"))
			recorder := record.NewFakeRecorder(100)
			p := NewProvisioner(kube, state.NewCluster(kube, clk), cloud, clk, recorder, NewBatcher(clk, time.Second, 10*time.Second), scheduling.DefaultNodeCosts())
			if _, err := p.Schedule(context.Background()); err != nil {
				t.Fatal(err)
			}
			var claims v1.NodeClaimList
			if err := kube.List(context.Background(), &claims, client.MatchingLabels{v1.LabelNodePool: "default"}); err != nil {
				t.Fatal(err)
			}
			if len(claims.Items) != tc.claims {
				t.Errorf("%d claims, want %d", len(claims.Items), tc.claims)
			}
			if tc.event == "" {
				return
			}
			close(recorder.Events)
			var events []string
			for e := range recorder.Events {
				events = append(events, e)
				if strings.Contains(e, "FailedScheduling") && strings.Contains(e, tc.event) {
					return
				}
			}
			t.Errorf("events %q; want a FailedScheduling event saying %q", events, tc.event)
		})
	}
}
