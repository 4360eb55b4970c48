package scheduling

import (
	"encoding/json"

	corev1 "k8s.io/api/core/v1"
)

// constraintSignature identifies pods whose node constraints are identical, whatever
// their resources: such pods get the same answer from every pool.
func constraintSignature(pod *corev1.Pod) string {
	raw, _ := json.Marshal(struct {
		NS          string
		Selector    map[string]string
		Affinity    *corev1.Affinity
		Tolerations []corev1.Toleration
	}{pod.Namespace, pod.Spec.NodeSelector, pod.Spec.Affinity, pod.Spec.Tolerations})
	return string(raw)
}

// bucket holds the pending replicas of one workload shape: same constraints, labels
// and requests, so one answer about the head pod holds for the rest.
type bucket struct {
	pods []*podInfo
	next int
	// unplaced counts the bucket's pods not placed yet, in any order.
	unplaced int64
}

func (b *bucket) head() *podInfo {
	for b.next < len(b.pods) && b.pods[b.next].placed {
		b.next++
	}
	if b.next == len(b.pods) {
		return nil
	}
	return b.pods[b.next]
}

// shape groups the buckets whose pods request the same resources: the fill
// heuristic scores a request, so it weighs each shape once rather than each of
// the thousands of buckets a large cluster has (a few dozen shapes).
type shape struct {
	requests Resources
	buckets  []*bucket
}

// bucketKey tells workloads apart: pods with equal keys are interchangeable.
type bucketKey struct {
	class          int
	spread, labels string
	requests       requestsKey
}

// requestsKey is Resources as a map key, built without formatting numbers.
type requestsKey struct {
	milliCPU, memory, pods, storage int64
	extended                        string
}

func (r Resources) key() requestsKey {
	k := requestsKey{milliCPU: r.MilliCPU, memory: r.Memory, pods: r.Pods, storage: r.EphemeralStorage}
	if len(r.Extended) > 0 {
		k.extended = r.String()
	}
	return k
}

func (s *solver) buildBuckets(pods []*podInfo) {
	index := map[bucketKey]*bucket{}
	shapes := map[requestsKey]*shape{}
	for _, p := range pods {
		key := bucketKey{class: p.class, labels: labelSignature(p.pod.Namespace, p.pod.Labels), requests: p.requests.key()}
		if len(p.pod.Spec.TopologySpreadConstraints) > 0 {
			raw, _ := json.Marshal(p.pod.Spec.TopologySpreadConstraints)
			key.spread = string(raw)
		}
		b, ok := index[key]
		if !ok {
			b = &bucket{}
			index[key] = b
			sh, ok := shapes[key.requests]
			if !ok {
				sh = &shape{requests: p.requests}
				shapes[key.requests] = sh
				s.shapes = append(s.shapes, sh)
			}
			sh.buckets = append(sh.buckets, b)
		}
		b.pods = append(b.pods, p)
		b.unplaced++
		p.bucket = b
	}
}

// fill packs a newly opened claim with pending pods, each time taking the workload
// whose request best aligns with the claim's remaining capacity (the dot-product
// heuristic for vector bin packing). Filling node by node this way uses cpu and
// memory together, where first-fit in size order fills one and strands the other.
func (s *solver) fill(c *claim) {
	failed := map[*bucket]bool{}
	for {
		var best *bucket
		bestScore := -1.0
		a := c.target.Allocatable
		if a.MilliCPU == 0 || a.Memory == 0 {
			return
		}
		remCPU := float64(c.remaining.MilliCPU) / float64(a.MilliCPU)
		remMem := float64(c.remaining.Memory) / float64(a.Memory)
		liveShapes := s.shapes[:0]
		for _, sh := range s.shapes {
			// Buckets empty out front to back mostly (the engine places pods in size
			// order); one emptied further back is passed over until it reaches the
			// front, so a fill step costs the shapes, not every bucket.
			for len(sh.buckets) > 0 && sh.buckets[0].head() == nil {
				sh.buckets = sh.buckets[1:]
			}
			if len(sh.buckets) == 0 {
				continue
			}
			liveShapes = append(liveShapes, sh)
			if !sh.requests.Fits(c.remaining) {
				continue
			}
			var first *bucket
			for _, b := range sh.buckets {
				if !failed[b] && b.head() != nil {
					first = b
					break
				}
			}
			if first == nil {
				continue
			}
			score := float64(sh.requests.MilliCPU)/float64(a.MilliCPU)*remCPU + float64(sh.requests.Memory)/float64(a.Memory)*remMem
			if score > bestScore {
				best, bestScore = first, score
			}
		}
		s.shapes = liveShapes
		if best == nil {
			break
		}
		p := best.head()
		if s.addToClaim(c, p) != nil {
			failed[best] = true
			continue
		}
		s.markPlaced(p)
	}
	if !s.minPod.Fits(c.remaining) {
		for i, open := range s.active {
			if open == c {
				s.active = append(s.active[:i], s.active[i+1:]...)
				break
			}
		}
	}
}
