package scheduling

import (
	"fmt"
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Small pods that the existing nodes' free room takes are no reason to size a new
// node for them. Consolidating two nodes of two large and seven small pods each,
// where the rest of the cluster had room for the small ones, the engine sized each
// large pod's node for a share of the small ones too, and planned four nodes of one
// large pod each where one node holds the four (the same price, four times the
// nodes), which consolidation then refused as growing the node count.
func TestNewNodeIsNotSizedForPodsExistingNodesTake(t *testing.T) {
	in := append(pods(4, "large", "3500m", "28Gi"), pods(14, "small", "900m", "3100Mi")...)
	var nodes []*ExistingNode
	for i := 0; i < 14; i++ {
		nodes = append(nodes, existingNode(fmt.Sprintf("roomy-%d", i), map[string]string{v1.LabelNodePool: "default"}, "1", "4Gi"))
	}
	r := solve(t, in, []*v1.NodePool{nodePool("default")}, func(in *Input) {
		in.Nodes = nodes
		in.InstanceTypes["default"] = nil
		for _, s := range []typeSpec{
			{"r6g.xlarge", "arm64", "4", "32Gi", 58, 0, 0.2016},
			{"r6g.2xlarge", "arm64", "8", "64Gi", 58, 0, 0.4032},
			{"r6g.4xlarge", "arm64", "16", "128Gi", 234, 0, 0.8064},
			{"m6g.xlarge", "arm64", "4", "16Gi", 58, 0, 0.154},
			{"m6g.4xlarge", "arm64", "16", "64Gi", 234, 0, 0.616},
		} {
			in.InstanceTypes["default"] = append(in.InstanceTypes["default"], makeInstanceType(s))
		}
	})
	t.Log(describePlan(r))
	if len(r.Unschedulable) > 0 {
		t.Fatalf("unschedulable: %v", r.Unschedulable)
	}
	onExisting := 0
	for _, e := range r.Existing {
		onExisting += len(e.Pods)
	}
	if len(r.NodeClaims) != 1 || onExisting < 10 {
		t.Errorf("planned %s with %d pods on the existing nodes; want one node for the four large pods and the small ones on the existing nodes", describePlan(r), onExisting)
	}
}
