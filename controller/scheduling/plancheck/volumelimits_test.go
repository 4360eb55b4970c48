package plancheck

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// A plan may not attach more volumes to an existing node than its CSINode allows;
// a claim the node's pods attach already, shared, adds nothing.
func TestVolumeLimitsOfExistingNodes(t *testing.T) {
	pod := func(name string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name)}}
	}
	bound, shares, adds := pod("bound"), pod("shares"), pod("adds")
	attachments := map[types.UID]scheduling.AttachedVolumes{
		"bound":  {"ebs.csi.aws.com": sets.New("default/a", "default/b")},
		"shares": {"ebs.csi.aws.com": sets.New("default/a")},
		"adds":   {"ebs.csi.aws.com": sets.New("default/c")},
	}
	node := &scheduling.ExistingNode{Name: "n", Pods: []*corev1.Pod{bound}, VolumeLimits: map[string]int{"ebs.csi.aws.com": 2}}
	if vs := volumeLimits(&scheduling.ExistingPlacement{Node: node, Pods: []*corev1.Pod{shares}}, attachments); len(vs) != 0 {
		t.Errorf("a shared claim adds no attachment, yet: %+v", vs)
	}
	vs := volumeLimits(&scheduling.ExistingPlacement{Node: node, Pods: []*corev1.Pod{adds}}, attachments)
	if len(vs) != 1 || vs[0].Rule != RuleVolumeLimits || vs[0].Node != "n" {
		t.Errorf("a third volume on a node that attaches 2: %+v", vs)
	}
	node.VolumeLimits = nil
	if vs := volumeLimits(&scheduling.ExistingPlacement{Node: node, Pods: []*corev1.Pod{adds}}, attachments); len(vs) != 0 {
		t.Errorf("a node without limits: %+v", vs)
	}
}
