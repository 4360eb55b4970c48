package scheduling

import (
	"testing"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// 40 pods of 1.8 GB and 20 of 400 MB: two large and one small fill Karpenter's
// default-instance-type exactly, so 20 of them hold everything ($16.59/h), which is
// what first-fit decreasing finds. A batch like this must never cost more than
// first-fit decreasing would.
func TestTailPackingIsNeverDearerThanFirstFitDecreasing(t *testing.T) {
	in := append(pods(40, "large", "0", "1.8G", withNodeSelector(v1.LabelArch, v1.ArchitectureAmd64)),
		pods(20, "small", "0", "400M", withNodeSelector(v1.LabelArch, v1.ArchitectureAmd64))...)
	r := solve(t, in, []*v1.NodePool{karpenterPool()}, onKarpenterCatalog)
	t.Log(describePlan(r))
	if len(r.Unschedulable) > 0 || len(r.NodeClaims) != 20 {
		t.Errorf("planned %s; want 20 default-instance-type nodes", describePlan(r))
	}
	if price := r.PricePerHour(); price > 20*0.8295+1e-3 {
		t.Errorf("planned $%.4f/h; first-fit decreasing pays $16.59/h", price)
	}
}
