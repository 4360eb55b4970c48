package termination

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// PodControllerIndex indexes Pods by the UID of the object that controls them, so
// a drain finds the replacements a ReplicaSet made for the pods it evicted.
const PodControllerIndex = "metadata.controllerUID"

// PodController is the index function of PodControllerIndex.
func PodController(o client.Object) []string {
	if ref := metav1.GetControllerOfNoCopy(o); ref != nil {
		return []string{string(ref.UID)}
	}
	return nil
}

// waveWait bounds how long a drain's smaller pods wait for the replacements of its
// largest: long enough for a ReplicaSet controller and a scheduler working through
// a consolidation of a hundred nodes (their default client rates are 20 and 50
// requests a second), short against an interruption's two minutes.
const waveWait = 10 * time.Second

// firstWave is a drain's first pass: when it ran, the size below which it held
// pods back (0 once they may go), and how many pods it evicted of each
// ReplicaSet.
type firstWave struct {
	at        time.Time
	threshold float64
	recreated map[types.UID]int
}

// wave returns the node's first pass, and whether this is it.
func (c *Controller) wave(node string) (bool, *firstWave) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.waves[node]; ok {
		return false, w
	}
	w := &firstWave{recreated: map[types.UID]int{}}
	c.waves[node] = w
	return true, w
}

func (c *Controller) forget(node string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waves, node)
}

// evicted counts a pod the first pass evicted toward its ReplicaSet's
// replacements. Other owners' replacements are not waited for: a StatefulSet
// recreates a pod only once it has gone, and a bare pod is not recreated.
func (w *firstWave) evicted(pod *corev1.Pod) {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "ReplicaSet" {
		w.recreated[ref.UID]++
	}
}

// landed reports whether the pods the first pass held back may go: every
// ReplicaSet whose pods it evicted has made as many pods since, and the scheduler
// has tried each (bound it, or found it no node), or waveWait has passed.
func (c *Controller) landed(ctx context.Context, w *firstWave, now time.Time) bool {
	if now.Sub(w.at) >= waveWait {
		return true
	}
	// Creation timestamps have whole seconds.
	since := w.at.Truncate(time.Second)
	for rs, want := range w.recreated {
		var pods corev1.PodList
		if err := c.kube.List(ctx, &pods, client.MatchingFields{PodControllerIndex: string(rs)}); err != nil {
			log.FromContext(ctx).Error(err, "listing the replacements of evicted pods; draining the rest without waiting for them")
			return true
		}
		made := 0
		for i := range pods.Items {
			p := &pods.Items[i]
			if p.DeletionTimestamp != nil || p.CreationTimestamp.Time.Before(since) {
				continue
			}
			made++
			if p.Spec.NodeName == "" && !triedToSchedule(p) {
				return false
			}
		}
		if made < want {
			return false
		}
	}
	return true
}

// triedToSchedule reports whether the scheduler has tried the unbound pod and
// found it no node.
func triedToSchedule(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
			return true
		}
	}
	return false
}

// evictionWave is the smallest size of pod a drain's first pass evicts: half the
// largest it may evict. The largest pods go first and the rest once the
// replacements of the first have landed (see landed), so that they reach the
// scheduler in that order: it puts each pod on the emptiest node that fits, and
// small pods arriving first would spread over the empty nodes launched for the
// large ones (a consolidation's replacements) and leave the large ones nowhere to
// go but a new node. A second was not enough: on consolidation-1000-700 a batch of
// 80 nodes evicts 80 large pods, which the ReplicaSet controller recreates at 20 a
// second, and the small pods' replacements came in among them. Pods of about one
// size go together; only one pass waits, so a large pod a PodDisruptionBudget
// holds never holds the others.
func evictionWave(sizeOf func(*corev1.Pod) float64, pods []corev1.Pod, group int, now time.Time) float64 {
	largest := 0.0
	for i := range pods {
		pod := &pods[i]
		if !needsEviction(pod) || pod.DeletionTimestamp != nil || evictionGroup(pod) != group {
			continue
		}
		if protected, _ := v1.PodDoNotDisrupt(pod, now); protected {
			continue
		}
		largest = max(largest, sizeOf(pod))
	}
	return largest / 2
}
