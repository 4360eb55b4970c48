package status

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	kubeletv1beta1 "k8s.io/kubelet/config/v1beta1"
	utiljson "sigs.k8s.io/json"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
)

// kubeletErrors checks the class's kubelet fields beyond the typed ones, as
// Karpenter v1.15 does: each must be a field of the upstream KubeletConfiguration
// (v1beta1) of the right type, registerWithTaints is the claim's, and only AL2023
// (whose NodeConfig takes any field) and Custom (which takes none) may have them.
func kubeletErrors(nc *awsv1.EC2NodeClass) error {
	k := nc.Spec.Kubelet
	if k == nil || len(k.Unmanaged) == 0 {
		return nil
	}
	var problems []string
	if _, ok := k.Unmanaged["registerWithTaints"]; ok {
		problems = append(problems, "spec.kubelet.registerWithTaints: can't be set, the node registers with its NodeClaim's taints so it stays unschedulable until ready")
	}
	raw, err := json.Marshal(k.Unmanaged)
	if err != nil {
		return reasoned{"InvalidKubeletConfiguration", err}
	}
	strict, err := utiljson.UnmarshalStrict(raw, &kubeletv1beta1.KubeletConfiguration{})
	if err != nil {
		problems = append(problems, "spec.kubelet: "+err.Error())
	}
	for _, e := range strict {
		problems = append(problems, "spec.kubelet: "+e.Error()+"; see the kubelet's KubeletConfiguration (v1beta1) for its fields")
	}
	if len(problems) > 0 {
		return reasoned{"InvalidKubeletConfiguration", fmt.Errorf("%s", strings.Join(problems, "; "))}
	}
	if fam := userdata.FamilyOf(nc); fam != userdata.FamilyAL2023 && fam != userdata.FamilyCustom {
		names := make([]string, 0, len(k.Unmanaged))
		for name := range k.Unmanaged {
			names = append(names, name)
		}
		sort.Strings(names)
		return reasoned{"UnsupportedKubeletConfiguration", fmt.Errorf("spec.kubelet has fields not applied by the %s AMI family that would be silently dropped: %s; use AL2023, or set them in spec.userData", fam, strings.Join(names, ", "))}
	}
	return nil
}
