package state

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func claimNamed(name string) v1.NodeClaim {
	return v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func names(claims []v1.NodeClaim) []string {
	out := make([]string, len(claims))
	for i := range claims {
		out[i] = claims[i].Name
	}
	return out
}

// TestCreatedClaimsCoverTheCacheLag: a claim created here counts as in flight until
// the cache lists it, and not after; one the cache never shows is dropped after the
// TTL.
func TestCreatedClaimsCoverTheCacheLag(t *testing.T) {
	now := time.Now()
	var u createdClaims
	a, b := claimNamed("a"), claimNamed("b")
	u.add(&a, now)
	u.add(&b, now)
	if got := names(u.merge(nil, now)); len(got) != 2 {
		t.Fatalf("before the cache lists them, merge gives %v, want both created claims", got)
	}
	if got := names(u.merge([]v1.NodeClaim{claimNamed("a")}, now)); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Fatalf("with a listed, merge gives %v, want [a b]", got)
	}
	if got := names(u.merge(nil, now)); len(got) != 1 || got[0] != "b" {
		t.Fatalf("once the cache listed a, merge gives %v, want only b: a listed claim that is gone is gone", got)
	}
	if got := names(u.merge(nil, now.Add(createdClaimsTTL+time.Second))); len(got) != 0 {
		t.Fatalf("past the TTL merge gives %v, want nothing", got)
	}
}
