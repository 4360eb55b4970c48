package state

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func claimOn(name string, annotations map[string]string) (v1.NodeClaim, corev1.Node) {
	nc := v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations}, Status: v1.NodeClaimStatus{ProviderID: "kwok://" + name}}
	node := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-node"}, Spec: corev1.NodeSpec{ProviderID: "kwok://" + name, Taints: []corev1.Taint{v1.DisruptedNoScheduleTaint}}}
	return nc, node
}

// Which tainted nodes are stale: not those a record, a deletion or this process
// explains; an edited record that does not parse explains nothing.
func TestStaleDisrupted(t *testing.T) {
	recorded := `{"id":"a-1","reason":"Underutilized","candidates":["recorded"],"replacements":["r"],"startedAt":"2026-11-23T12:00:00Z"}`
	now := metav1.NewTime(time.Now())
	v := &View{}
	for _, c := range []struct {
		name        string
		annotations map[string]string
		deleting    bool
	}{
		{"stale", nil, false},
		{"recorded", map[string]string{DisruptionAnnotationKey: recorded}, false},
		{"garbled", map[string]string{DisruptionAnnotationKey: "{not json"}, false},
		{"deleting", nil, true},
		{"active", nil, false},
	} {
		nc, node := claimOn(c.name, c.annotations)
		if c.deleting {
			nc.DeletionTimestamp = &now
		}
		v.Claims, v.Nodes = append(v.Claims, nc), append(v.Nodes, node)
	}
	untainted, _ := claimOn("untainted", nil)
	v.Claims = append(v.Claims, untainted)
	v.Nodes = append(v.Nodes, corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "untainted-node"}, Spec: corev1.NodeSpec{ProviderID: "kwok://untainted"}})
	v.index()
	var got []string
	for _, n := range v.StaleDisrupted(sets.New("active")) {
		got = append(got, n.Name)
	}
	if len(got) != 2 || got[0] != "stale-node" || got[1] != "garbled-node" {
		t.Errorf("stale: %v, want [stale-node garbled-node]", got)
	}
	ds := v.RecordedDisruptions()
	if len(ds) != 1 || ds[0].ID != "a-1" || ds[0].Replacements[0] != "r" {
		t.Errorf("recorded disruptions: %+v, want the one on \"recorded\"", ds)
	}
}

// Rolling back in the process that recorded the disruption clears the record, though
// its copy of the claim was read before the record was written.
func TestClearDisruptionReadsTheClaimAfresh(t *testing.T) {
	ctx := context.Background()
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	kube := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(nc.DeepCopy()).Build()
	d := &Disruption{ID: "a-1", Reason: v1.DisruptionReasonUnderutilized, Candidates: []string{"a"}, Replacements: []string{"r"}}
	if err := RecordDisruption(ctx, kube, d, nc); err != nil {
		t.Fatal(err)
	}
	if err := ClearDisruption(ctx, kube, nc); err != nil {
		t.Fatal(err)
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "a"}, got); err != nil {
		t.Fatal(err)
	}
	if Recorded(got) != nil {
		t.Error("the record stays after a rollback with the caller's older copy of the claim")
	}
}
