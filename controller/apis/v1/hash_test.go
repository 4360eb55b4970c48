package v1

import (
	"encoding/json"
	"testing"
)

// TestNodePoolHashIsKarpenters: the hashes below were computed by Karpenter's own
// NodePool.Hash (sigs.k8s.io/karpenter v1.12.0, hash version v3) for the same
// pools, so a node Karpenter launched is not drifted by Dovetail, and one whose pool
// changed still is.
func TestNodePoolHashIsKarpenters(t *testing.T) {
	cases := map[string]struct{ pool, want string }{
		"minimal":                                {`{"spec":{"template":{"spec":{"requirements":[{"key":"kubernetes.io/arch","operator":"In","values":["amd64"]}],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}}}`, "17369979337536258260"},
		"requirements do not count":              {`{"spec":{"template":{"spec":{"requirements":[{"key":"karpenter.sh/capacity-type","operator":"In","values":["spot","on-demand"]}],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"}}}}}`, "17369979337536258260"},
		"expireAfter as defaulted":               {`{"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"expireAfter":"720h"}}}}`, "6821555240594823858"},
		"labels, annotations, taints, durations": {`{"spec":{"template":{"metadata":{"labels":{"team":"search","tier":"web"},"annotations":{"example.com/owner":"search"}},"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"search"},"taints":[{"key":"dedicated","value":"search","effect":"NoSchedule"}],"startupTaints":[{"key":"ebs.csi.aws.com/agent-not-ready","effect":"NoExecute"}],"expireAfter":"168h","terminationGracePeriod":"48h0m0s"}}}}`, "5606752294180001598"},
		"expireAfter Never":                      {`{"spec":{"template":{"spec":{"requirements":[],"nodeClassRef":{"group":"karpenter.k8s.aws","kind":"EC2NodeClass","name":"default"},"expireAfter":"Never"}}}}`, "17369979337536258260"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var np NodePool
			if err := json.Unmarshal([]byte(c.pool), &np); err != nil {
				t.Fatal(err)
			}
			if got := np.Hash(); got != c.want {
				t.Errorf("Hash() = %s, Karpenter computes %s", got, c.want)
			}
		})
	}
}
