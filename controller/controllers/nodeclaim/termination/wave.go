package termination

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
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
// pods back (0 once they may go; only the claim's own drain reads and writes it),
// and how many pods it evicted of each ReplicaSet.
type firstWave struct {
	at        time.Time
	threshold float64
	evicted   map[types.UID]int
}

// wave returns the claim's first pass, and whether this is it (starting now).
func (c *Controller) wave(claim string, now time.Time) (bool, *firstWave) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if w, ok := c.waves[claim]; ok {
		return false, w
	}
	w := &firstWave{at: now, evicted: map[types.UID]int{}}
	c.waves[claim] = w
	c.pruneWaves(now)
	c.recentWaves = append(c.recentWaves, w)
	c.landedCheck = landedCheck{}
	return true, w
}

// pruneWaves drops the waves older than waveWait from recentWaves; c.mu is held.
func (c *Controller) pruneWaves(now time.Time) {
	c.recentWaves = slices.DeleteFunc(c.recentWaves, func(w *firstWave) bool { return now.Sub(w.at) >= waveWait })
}

// forget drops the claim's wave once its finalizer is released (its recent wave
// stays in recentWaves until waveWait has passed).
func (c *Controller) forget(claim string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.waves, claim)
}

// evictedPod counts a pod the first pass evicted toward its ReplicaSet's
// replacements. Other owners' replacements are not waited for: a StatefulSet
// recreates a pod only once it has gone, and a bare pod is not recreated.
func (c *Controller) evictedPod(w *firstWave, pod *corev1.Pod) {
	if ref := metav1.GetControllerOfNoCopy(pod); ref != nil && ref.Kind == "ReplicaSet" {
		c.mu.Lock()
		w.evicted[ref.UID]++
		c.landedCheck = landedCheck{}
		c.mu.Unlock()
	}
}

// landedCheck is the last answer of wavesLanded, reused for half a second: every
// draining node asks each second, and the answer is the same for all of them.
type landedCheck struct {
	at     time.Time
	landed bool
}

// landed reports whether the pods the claim's first pass held back may go: the
// first passes of the last waveWait (this claim's and the others') have landed, or
// waveWait has passed since this claim's.
func (c *Controller) landed(ctx context.Context, own *firstWave, now time.Time) bool {
	if now.Sub(own.at) >= waveWait {
		return true
	}
	c.mu.Lock()
	if last := c.landedCheck; !last.at.IsZero() && now.Sub(last.at) < 500*time.Millisecond {
		c.mu.Unlock()
		return last.landed
	}
	// A node whose pods all went in its first pass is gone before their
	// replacements are scheduled; its wave still holds the others.
	c.pruneWaves(now)
	evicted := map[types.UID]int{}
	var since time.Time
	for _, w := range c.recentWaves {
		for rs, n := range w.evicted {
			evicted[rs] += n
		}
		if since.IsZero() || w.at.Before(since) {
			since = w.at
		}
	}
	c.mu.Unlock()
	landed := c.wavesLanded(ctx, evicted, since)
	c.mu.Lock()
	c.landedCheck = landedCheck{at: now, landed: landed}
	c.mu.Unlock()
	return landed
}

// wavesLanded reports whether every ReplicaSet has made, since the first wave
// began, at least as many pods as the waves evicted of it, and the scheduler has
// tried each (bound it, or found it no node). Each ReplicaSet is counted over all
// the waves together: it recreates pods in order, so one wave's count would
// include the replacements of the pods another evicted before it.
func (c *Controller) wavesLanded(ctx context.Context, evicted map[types.UID]int, since time.Time) bool {
	// Creation timestamps have whole seconds, and the API server's clock is not
	// ours: a second of margin.
	since = since.Add(-time.Second).Truncate(time.Second)
	for rs, want := range evicted {
		var pods corev1.PodList
		if err := c.kube.List(ctx, &pods, client.MatchingFields{PodControllerIndex: string(rs)}, client.UnsafeDisableDeepCopy); err != nil {
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

// podsOfOtherDrains lists the pods on the other nodes being drained: a node's first
// pass holds back its pods that are small beside the largest of any drain, so
// that a node of small pods does not send them to the scheduler ahead of the
// large pods of the nodes drained with it.
func (c *Controller) podsOfOtherDrains(ctx context.Context, node string) ([]corev1.Pod, error) {
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing nodeclaims, %w", err)
	}
	var out []corev1.Pod
	for i := range claims.Items {
		nc := &claims.Items[i]
		if nc.DeletionTimestamp == nil || nc.Status.NodeName == "" || nc.Status.NodeName == node {
			continue
		}
		var pods corev1.PodList
		if err := c.kube.List(ctx, &pods, client.MatchingFields{"spec.nodeName": nc.Status.NodeName}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing pods of node %s, %w", nc.Status.NodeName, err)
		}
		out = append(out, pods.Items...)
	}
	return out, nil
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
// largest it may evict, of its own pods and those of the other nodes draining
// (measured on this node). The largest pods go first and the rest once the
// replacements of the first have landed (see landed), so that they reach the
// scheduler in that order: it puts each pod on the emptiest node that fits, and
// small pods arriving first would spread over the empty nodes launched for the
// large ones (a consolidation's replacements) and leave the large ones nowhere to
// go but a new node. On consolidation-1000-700 a second's wait was not enough (a
// batch of 80 nodes evicts 80 large pods, which the ReplicaSet controller
// recreates at 20 a second), nor was ordering each node alone (nodes holding only
// small pods sent them all at once). Pods of about one size go together. Only the
// replacements of pods actually evicted are waited for, so a large pod that a
// PodDisruptionBudget or do-not-disrupt keeps never holds the others.
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

// podSizer measures a pod on the node: the larger of its cpu and memory requests
// as shares of the node's allocatable (its cpu request in cores when the node
// reports none).
func podSizer(node *corev1.Node) func(*corev1.Pod) float64 {
	alloc := scheduling.FromResourceList(node.Status.Allocatable)
	return func(pod *corev1.Pod) float64 {
		requests := scheduling.PodRequests(pod)
		if alloc.MilliCPU <= 0 || alloc.Memory <= 0 {
			return float64(requests.MilliCPU) / 1000
		}
		return max(float64(requests.MilliCPU)/float64(alloc.MilliCPU), float64(requests.Memory)/float64(alloc.Memory))
	}
}
