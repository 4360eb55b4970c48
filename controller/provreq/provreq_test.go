package provreq

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

func template(name, cpu string) *corev1.PodTemplate {
	return &corev1.PodTemplate{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml"}, Template: corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"set": name}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}}}}}}
}

func gang(sets ...autoscalingv1.PodSet) *autoscalingv1.ProvisioningRequest {
	return &autoscalingv1.ProvisioningRequest{ObjectMeta: metav1.ObjectMeta{Name: "train", Namespace: "ml", UID: "uid-train"},
		Spec: autoscalingv1.ProvisioningRequestSpec{ProvisioningClassName: autoscalingv1.ProvisioningClassBestEffortAtomicScaleUp, PodSets: sets}}
}

func node(name string, cpu int64, labels map[string]string) *scheduling.ExistingNode {
	l := map[string]string{v1.LabelHostname: name}
	for k, v := range labels {
		l[k] = v
	}
	r := scheduling.Resources{MilliCPU: cpu * 1000, Memory: 16 << 30, Pods: 110}
	return &scheduling.ExistingNode{Name: name, Labels: l, Capacity: r, Allocatable: r}
}

func TestVirtualPodsAreTheTemplatesTimesCount(t *testing.T) {
	pr := gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "launcher"}, Count: 1},
		autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "worker"}, Count: 3})
	pods, err := VirtualPods(pr, map[string]*corev1.PodTemplate{"launcher": template("launcher", "1"), "worker": template("worker", "3")})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods) != 4 {
		t.Fatalf("%d pods; want 1 launcher and 3 workers", len(pods))
	}
	for i, p := range pods {
		want := "worker"
		if i == 0 {
			want = "launcher"
		}
		if p.Labels["set"] != want || !IsVirtual(p) || Consumes(p) != "ml/train" || p.Spec.NodeName != "" {
			t.Errorf("pod %d: labels %v annotations %v; want the %s template's, virtual, consuming ml/train", i, p.Labels, p.Annotations, want)
		}
		// Limits alone are requests, as the API server defaults the pod.
		if got := scheduling.PodRequests(p).MilliCPU; (want == "worker" && got != 3000) || (want == "launcher" && got != 1000) {
			t.Errorf("pod %d requests %dm cpu", i, got)
		}
	}
	_, err = VirtualPods(pr, map[string]*corev1.PodTemplate{"worker": template("worker", "3")})
	var missing *MissingTemplatesError
	if !errors.As(err, &missing) || len(missing.Names) != 1 || missing.Names[0] != "launcher" {
		t.Errorf("a missing template: %v; want it named", err)
	}
}

// A booking is held on the request's own nodes first, leaves others' room alone,
// and holds one pod less for each pod that consumes it.
func TestHoldPutsTheBookingOnItsOwnNodesFirst(t *testing.T) {
	pods, err := VirtualPods(gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "worker"}, Count: 2}),
		map[string]*corev1.PodTemplate{"worker": template("worker", "3")})
	if err != nil {
		t.Fatal(err)
	}
	own := map[string]string{dovetailv1alpha1.ProvisioningRequestLabelKey: "uid-train"}
	other, a, b := node("other", 4, nil), node("own-a", 4, own), node("own-b", 4, own)
	snap := &scheduling.Snapshot{Nodes: []*scheduling.ExistingNode{other, a, b}}
	held := Hold(snap, []Booking{{Key: "ml/train", UID: "uid-train", Pods: pods}})
	if len(other.Pods) != 0 || len(a.Pods) != 1 || len(b.Pods) != 1 || len(held["own-a"]) != 1 || held["own-a"][0] != "ml/train" {
		t.Fatalf("held on other %d, own-a %d, own-b %d (%v); want one on each own node", len(other.Pods), len(a.Pods), len(b.Pods), held)
	}
	if got := BookedOn(a); len(got) != 1 || got[0] != "ml/train" {
		t.Errorf("BookedOn(own-a) = %v", got)
	}

	// A consumer bound to own-a takes its pod's place; a pending one takes the other.
	consumer := func(name, nodeName string) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ml", Annotations: map[string]string{autoscalingv1.ConsumeAnnotationKey: "train"}},
			Spec: *pods[0].Spec.DeepCopy()}
		p.Spec.NodeName = nodeName
		return p
	}
	other, a, b = node("other", 4, nil), node("own-a", 4, own), node("own-b", 4, own)
	a.Pods = []*corev1.Pod{consumer("w0", "own-a")}
	snap = &scheduling.Snapshot{Nodes: []*scheduling.ExistingNode{other, a, b}}
	Hold(snap, []Booking{{Key: "ml/train", UID: "uid-train", Pods: pods}})
	if len(a.Pods) != 1 || len(b.Pods) != 2-1 || IsVirtual(a.Pods[0]) {
		t.Fatalf("with one consumer bound: own-a %d pods, own-b %d; want the consumer alone on own-a and one booked on own-b", len(a.Pods), len(b.Pods))
	}
	snap.Pending = []*corev1.Pod{consumer("w1", "")}
	other, a, b = node("other", 4, nil), node("own-a", 4, own), node("own-b", 4, own)
	a.Pods = []*corev1.Pod{consumer("w0", "own-a")}
	snap.Nodes = []*scheduling.ExistingNode{other, a, b}
	Hold(snap, []Booking{{Key: "ml/train", UID: "uid-train", Pods: pods}})
	if len(b.Pods) != 0 {
		t.Errorf("with both consumers there: %d booked on own-b; want none, its room is the pending consumer's", len(b.Pods))
	}
}

func TestUnconsumedMatchesConsumersByWhatTheyAsk(t *testing.T) {
	pr := gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "launcher"}, Count: 1},
		autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "worker"}, Count: 2})
	pods, err := VirtualPods(pr, map[string]*corev1.PodTemplate{"launcher": template("launcher", "1"), "worker": template("worker", "3")})
	if err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{Spec: *pods[1].Spec.DeepCopy()}
	left := Unconsumed(pods, []*corev1.Pod{worker})
	if len(left) != 2 || left[0] != pods[0] || left[1] != pods[2] {
		t.Errorf("a worker consumed: left %d pods; want the launcher and one worker", len(left))
	}
}

// Bookings go on their own nodes before any goes elsewhere, and never on another
// booking's: a generic booking sorted first does not take a gang's GPU node.
func TestHoldKeepsEachBookingsOwnNodesForIt(t *testing.T) {
	a := gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "w"}, Count: 1})
	a.Name, a.UID = "a", "uid-a"
	b := gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "g"}, Count: 1})
	b.Name, b.UID = "b", "uid-b"
	pa, err := VirtualPods(a, map[string]*corev1.PodTemplate{"w": template("w", "3")})
	if err != nil {
		t.Fatal(err)
	}
	gpu := template("g", "3")
	gpu.Template.Spec.NodeSelector = map[string]string{"gpu": "true"}
	pb, err := VirtualPods(b, map[string]*corev1.PodTemplate{"g": gpu})
	if err != nil {
		t.Fatal(err)
	}
	gpuNode := node("gpu-b", 4, map[string]string{"gpu": "true", dovetailv1alpha1.ProvisioningRequestLabelKey: "uid-b"})
	other := node("x", 4, nil)
	snap := &scheduling.Snapshot{Nodes: []*scheduling.ExistingNode{gpuNode, other}}
	Hold(snap, []Booking{{Key: "ml/a", UID: "uid-a", Pods: pa}, {Key: "ml/b", UID: "uid-b", Pods: pb}})
	if got := BookedOn(gpuNode); len(got) != 1 || got[0] != "ml/b" {
		t.Errorf("b's own GPU node holds %v; want ml/b", got)
	}
	if got := BookedOn(other); len(got) != 1 || got[0] != "ml/a" {
		t.Errorf("the other node holds %v; want ml/a", got)
	}
}

// A consumer that asks a little more than its template (a sidecar, a LimitRange
// default) frees its own pod set's room: by Kueue's pod-set label, or else the
// smallest slot it fits into, not the first one.
func TestUnconsumedMatchesConsumersToTheirPodSet(t *testing.T) {
	pr := gang(autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "ppt-train-launcher"}, Count: 1},
		autoscalingv1.PodSet{PodTemplateRef: autoscalingv1.Reference{Name: "ppt-train-worker"}, Count: 1})
	pods, err := VirtualPods(pr, map[string]*corev1.PodTemplate{"ppt-train-launcher": template("ppt-train-launcher", "1"), "ppt-train-worker": template("ppt-train-worker", "3")})
	if err != nil {
		t.Fatal(err)
	}
	worker := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml"}, Spec: *pods[1].Spec.DeepCopy()}
	worker.Spec.Containers = append(worker.Spec.Containers, corev1.Container{Name: "sidecar", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}})
	// 3.1 cpu fits no slot: the largest goes.
	if left := Unconsumed(pods, []*corev1.Pod{worker}); len(left) != 1 || left[0] != pods[0] {
		t.Errorf("a worker with a sidecar consumed the launcher's slot")
	}
	// A launcher with a sidecar fits the worker's slot too, but its pod set says which.
	launcher := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Labels: map[string]string{KueuePodSetLabel: "launcher"}}, Spec: *worker.Spec.DeepCopy()}
	launcher.Spec.Containers[0].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	launcher.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	if left := Unconsumed(pods, []*corev1.Pod{launcher}); len(left) != 1 || left[0] != pods[1] {
		t.Errorf("the launcher did not consume its own pod set's slot")
	}
}
