package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func reversed(in []*corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(in))
	for i, p := range in {
		out[len(in)-1-i] = p
	}
	return out
}

// "Run next to my database": ten replicas with required zone affinity to a pod
// that is pending in the same batch and pinned to one zone. Karpenter places all
// eleven in that zone, whichever is listed first; so must we.
func TestZoneAffinityToAPodPendingInTheBatch(t *testing.T) {
	// The followers are the larger pods, so first-fit decreasing meets them first.
	db := pod("db", "500m", "512Mi", withPodLabel("app", "db"), withNodeSelector(v1.LabelTopologyZone, "us-west-2b"))
	web := pods(10, "web", "1", "1Gi", withPodLabel("app", "web"), withAffinity(v1.LabelTopologyZone, map[string]string{"app": "db"}))
	for name, order := range map[string][]*corev1.Pod{"followers first": append(append([]*corev1.Pod{}, web...), db), "target first": append([]*corev1.Pod{db}, web...), "reversed": reversed(append([]*corev1.Pod{db}, web...))} {
		t.Run(name, func(t *testing.T) {
			r := solve(t, order, []*v1.NodePool{nodePool("default")})
			if len(r.Unschedulable) > 0 {
				t.Fatalf("unschedulable: %v", r.Unschedulable)
			}
			for _, p := range order {
				nc := claimOf(r, p.Name)
				if nc == nil {
					t.Fatalf("%s not placed", p.Name)
				}
				if z := label(nc, v1.LabelTopologyZone); z != "us-west-2b" {
					t.Errorf("%s in %s, want us-west-2b with the database", p.Name, z)
				}
			}
		})
	}
}

// The target need not be pinned: the zone its claim gets is the one its followers
// join, rather than a claim open to three zones that is in none of them yet.
func TestZoneAffinityToAnUnpinnedPendingPod(t *testing.T) {
	db := pod("db", "1", "2Gi", withPodLabel("app", "db"))
	web := pods(6, "web", "500m", "512Mi", withPodLabel("app", "web"), withAffinity(v1.LabelTopologyZone, map[string]string{"app": "db"}))
	r := solve(t, append(web, db), []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	zone := label(claimOf(r, "db"), v1.LabelTopologyZone)
	for _, p := range web {
		if z := label(claimOf(r, p.Name), v1.LabelTopologyZone); z != zone {
			t.Errorf("%s in %s, the database in %s", p.Name, z, zone)
		}
	}
}

// A chain of hostname affinities listed from its far end: ui needs cache, cache
// needs web, web needs db. Karpenter puts all four on one node.
func TestHostnameAffinityChainListedBackwards(t *testing.T) {
	chain := []*corev1.Pod{
		pod("ui", "500m", "512Mi", withPodLabel("app", "ui"), withAffinity(v1.LabelHostname, map[string]string{"app": "cache"})),
		pod("cache", "500m", "512Mi", withPodLabel("app", "cache"), withAffinity(v1.LabelHostname, map[string]string{"app": "web"})),
		pod("web", "500m", "512Mi", withPodLabel("app", "web"), withAffinity(v1.LabelHostname, map[string]string{"app": "db"})),
		pod("db", "500m", "512Mi", withPodLabel("app", "db")),
	}
	r := solve(t, chain, []*v1.NodePool{nodePool("default")})
	if len(r.Unschedulable) > 0 || len(r.NodeClaims) != 1 || len(r.NodeClaims[0].Pods) != 4 {
		t.Fatalf("want all four on one node; claims %d, unschedulable %v", len(r.NodeClaims), r.Unschedulable)
	}
}

// Pods whose affinity targets can never be placed, or that wait on each other, are
// still reported, naming the rule.
func TestAffinityWithNoPlaceableTargetSaysWhy(t *testing.T) {
	in := []*corev1.Pod{
		pod("follower", "500m", "512Mi", withAffinity(v1.LabelTopologyZone, map[string]string{"app": "db"})),
		pod("db", "500m", "512Mi", withPodLabel("app", "db"), withNodeSelector(v1.LabelTopologyZone, "eu-west-1a")),
		pod("a", "500m", "512Mi", withPodLabel("app", "a"), withAffinity(v1.LabelHostname, map[string]string{"app": "b"})),
		pod("b", "500m", "512Mi", withPodLabel("app", "b"), withAffinity(v1.LabelHostname, map[string]string{"app": "a"})),
	}
	r := solve(t, in, []*v1.NodePool{nodePool("default")})
	for _, name := range []string{"follower", "a", "b"} {
		reason := unschedulable(r, name)
		if reason == "" || !containsAll(reason, "pod affinity") {
			t.Errorf("%s: reason %q, want one naming the pod affinity", name, reason)
		}
	}
	if unschedulable(r, "db") == "" {
		t.Errorf("db, pinned to a zone nothing offers, was placed")
	}
}

func containsAll(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
