package operator

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The cached pod keeps everything planning, draining and the metrics read, and
// loses the bulk nothing here reads.
func TestTrimPodKeepsWhatThePlannerReads(t *testing.T) {
	always := corev1.ContainerRestartPolicyAlways
	requests := corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}
	heavy := corev1.Container{Image: "app:1", Command: []string{"run"}, Args: []string{"--flag"},
		Env: []corev1.EnvVar{{Name: "A", Value: "b"}}, VolumeMounts: []corev1.VolumeMount{{Name: "token", MountPath: "/var/run"}},
		LivenessProbe: &corev1.Probe{}, SecurityContext: &corev1.SecurityContext{}}
	app, sidecar := heavy, heavy
	app.Name, app.Resources, app.Ports = "app", requests, []corev1.ContainerPort{{HostPort: 8080, ContainerPort: 80, Protocol: corev1.ProtocolTCP}}
	sidecar.Name, sidecar.Resources, sidecar.RestartPolicy = "proxy", requests, &always
	priority, grace := int32(1000), int64(30)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "default", Labels: map[string]string{"app": "web"},
			Annotations:   map[string]string{"karpenter.sh/do-not-disrupt": "true", lastAppliedAnnotation: "{...}"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{app}, InitContainers: []corev1.Container{sidecar},
			EphemeralContainers: []corev1.EphemeralContainer{{}},
			NodeSelector:        map[string]string{"zone": "a"}, Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}},
			Affinity:                  &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{}},
			TopologySpreadConstraints: []corev1.TopologySpreadConstraint{{MaxSkew: 1, TopologyKey: "zone"}},
			Volumes: []corev1.Volume{
				{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}},
				{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}},
			},
			Priority: &priority, TerminationGracePeriodSeconds: &grace, SchedulerName: "default-scheduler", NodeName: "n",
			Overhead: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app"}}},
	}
	want := pod.DeepCopy()
	want.ManagedFields = nil
	delete(want.Annotations, lastAppliedAnnotation)
	want.Spec.Containers = []corev1.Container{{Name: "app", Resources: requests, Ports: app.Ports}}
	want.Spec.InitContainers = []corev1.Container{{Name: "proxy", Resources: requests, RestartPolicy: &always}}
	want.Spec.EphemeralContainers = nil
	want.Spec.Volumes[1].VolumeSource = corev1.VolumeSource{}
	want.Status.ContainerStatuses = nil

	got, err := trimPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("trimmed pod (-want +got):\n%s", diff)
	}
	// Other kinds only lose their managed fields.
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}}}
	if out, _ := trimPod(node); out.(*corev1.Node).ManagedFields != nil {
		t.Error("a node kept its managed fields")
	}
}
