package status

import (
	"errors"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
)

// TestFreeFormKubeletValidation: v1.15's free-form kubelet fields are accepted for
// AL2023 when upstream's KubeletConfiguration has them, and refused, with
// Karpenter's reasons, when it does not, when their type is wrong, for
// registerWithTaints, or on a family that cannot apply them.
func TestFreeFormKubeletValidation(t *testing.T) {
	class := func(alias string, fields map[string]string) *awsv1.EC2NodeClass {
		nc := &awsv1.EC2NodeClass{Spec: awsv1.EC2NodeClassSpec{AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: alias}}, Kubelet: &awsv1.KubeletConfiguration{}}}
		for k, v := range fields {
			if nc.Spec.Kubelet.Unmanaged == nil {
				nc.Spec.Kubelet.Unmanaged = map[string]apiextensionsv1.JSON{}
			}
			nc.Spec.Kubelet.Unmanaged[k] = apiextensionsv1.JSON{Raw: []byte(v)}
		}
		return nc
	}
	for _, tc := range []struct {
		name, alias string
		fields      map[string]string
		reason      string
		message     string
	}{
		{"none", "al2@latest", nil, "", ""},
		{"AL2023 takes any upstream field", "al2023@latest", map[string]string{"shutdownGracePeriod": `"30s"`, "containerLogMaxSize": `"50Mi"`}, "", ""},
		{"no such field", "al2023@latest", map[string]string{"notAField": `1`}, "InvalidKubeletConfiguration", `unknown field "notAField"`},
		{"wrong type", "al2023@latest", map[string]string{"serializeImagePulls": `"yes"`}, "InvalidKubeletConfiguration", "spec.kubelet: "},
		{"registerWithTaints", "al2023@latest", map[string]string{"registerWithTaints": `[]`}, "InvalidKubeletConfiguration", "spec.kubelet.registerWithTaints: can't be set"},
		{"AL2 cannot apply it", "al2@latest", map[string]string{"shutdownGracePeriod": `"30s"`}, "UnsupportedKubeletConfiguration", "not applied by the AL2 AMI family that would be silently dropped: shutdownGracePeriod"},
		{"Bottlerocket cannot apply it", "bottlerocket@latest", map[string]string{"shutdownGracePeriod": `"30s"`}, "UnsupportedKubeletConfiguration", "Bottlerocket"},
	} {
		err := kubeletErrors(class(tc.alias, tc.fields))
		var r reasoned
		switch {
		case tc.reason == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.reason != "" && (!errors.As(err, &r) || r.reason != tc.reason || !strings.Contains(err.Error(), tc.message)):
			t.Errorf("%s: %v (reason %q); want %s with %q", tc.name, err, r.reason, tc.reason, tc.message)
		}
	}
}
