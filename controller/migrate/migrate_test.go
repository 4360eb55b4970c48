package migrate

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func convertFile(t *testing.T, file string, opts Options) *Result {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	docs, err := Decode(f)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Convert(docs, opts)
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func object(t *testing.T, res *Result, kind, name string) *Object {
	t.Helper()
	for _, o := range res.Objects {
		if o.Kind == kind && o.Name == name {
			return o
		}
	}
	t.Fatalf("no %s %s in %d objects", kind, name, len(res.Objects))
	return nil
}

func at(o *Object, path ...string) any { return dig(o.Body, path...) }

func noted(o *Object, want string) bool {
	for _, n := range o.Notes {
		if strings.Contains(n, want) {
			return true
		}
	}
	return false
}

// Each conversion rule, on the walkthrough manifests of Karpenter's old docs.
func TestConversionRules(t *testing.T) {
	gs := convertFile(t, "v1alpha5-getting-started.yaml", Options{Role: "KarpenterNodeRole-demo"})
	pool := object(t, gs, "NodePool", "default")
	class := object(t, gs, "EC2NodeClass", "default")
	inline := convertFile(t, "v1alpha5-inline-provider.yaml", Options{})
	ipool, iclass := object(t, inline, "NodePool", "default"), object(t, inline, "EC2NodeClass", "default")
	cons := convertFile(t, "v1alpha5-consolidation.yaml", Options{InstanceProfile: "general-nodes"})
	cpool, cclass := object(t, cons, "NodePool", "general"), object(t, cons, "EC2NodeClass", "general")
	beta := convertFile(t, "v1beta1-getting-started.yaml", Options{})
	bpool, bclass := object(t, beta, "NodePool", "default"), object(t, beta, "EC2NodeClass", "default")

	cases := []struct {
		rule      string
		got, want any
		note      *Object
		noteText  string
	}{
		{"apiVersion is v1", at(pool, "apiVersion"), "karpenter.sh/v1", nil, ""},
		{"ttlSecondsAfterEmpty → WhenEmpty", at(pool, "spec", "disruption", "consolidationPolicy"), "WhenEmpty", pool, "ttlSecondsAfterEmpty: 30"},
		{"ttlSecondsAfterEmpty → consolidateAfter", at(pool, "spec", "disruption", "consolidateAfter"), "30s", nil, ""},
		{"no ttlSecondsUntilExpired → expireAfter Never", at(pool, "spec", "template", "spec", "expireAfter"), "Never", pool, "v1 defaults to 720h"},
		{"ttlSecondsUntilExpired → expireAfter", at(ipool, "spec", "template", "spec", "expireAfter"), "2592000s", ipool, "ttlSecondsUntilExpired"},
		{"consolidation.enabled → WhenEmptyOrUnderutilized", at(cpool, "spec", "disruption", "consolidationPolicy"), "WhenEmptyOrUnderutilized", cpool, "consolidation.enabled"},
		{"consolidation.enabled → consolidateAfter 0s", at(cpool, "spec", "disruption", "consolidateAfter"), "0s", nil, ""},
		{"limits.resources → limits", at(pool, "spec", "limits", "cpu"), int64(1000), nil, ""},
		{"weight kept", at(cpool, "spec", "weight"), int64(10), nil, ""},
		{"labels → template metadata", at(ipool, "spec", "template", "metadata", "labels", "billing-team"), "my-team", nil, ""},
		{"providerRef → nodeClassRef group", at(pool, "spec", "template", "spec", "nodeClassRef", "group"), "karpenter.k8s.aws", nil, ""},
		{"providerRef → nodeClassRef kind", at(pool, "spec", "template", "spec", "nodeClassRef", "kind"), "EC2NodeClass", nil, ""},
		{"inline provider → a class of the pool's name", at(ipool, "spec", "template", "spec", "nodeClassRef", "name"), "default", ipool, "inline provider"},
		{"inline provider's instance profile kept", at(iclass, "spec", "instanceProfile"), "KarpenterNodeInstanceProfile-demo", nil, ""},
		{"inline provider's tags kept", at(iclass, "spec", "tags", "team"), "billing", nil, ""},
		{"subnetSelector → tag term", at(class, "spec", "subnetSelectorTerms").([]any)[0].(map[string]any)["tags"].(map[string]any)["karpenter.sh/discovery"], "demo", nil, ""},
		{"aws-ids → one id term each", len(at(cclass, "spec", "subnetSelectorTerms").([]any)), 2, nil, ""},
		{"aws-ids → id", at(cclass, "spec", "subnetSelectorTerms").([]any)[1].(map[string]any)["id"], "subnet-0fedcba9876543210", nil, ""},
		{"no amiFamily → alias al2@latest", at(class, "spec", "amiSelectorTerms").([]any)[0].(map[string]any)["alias"], "al2@latest", class, "defaulted to AL2"},
		{"amiSelector → name and owner term", at(cclass, "spec", "amiSelectorTerms").([]any)[0].(map[string]any)["name"], "amazon-eks-node-1.27-*", nil, ""},
		{"amiSelector owner", at(cclass, "spec", "amiSelectorTerms").([]any)[0].(map[string]any)["owner"], "602401143452", nil, ""},
		{"amiFamily kept beside amiSelector", at(cclass, "spec", "amiFamily"), "AL2", nil, ""},
		{"blockDeviceMappings kept", at(cclass, "spec", "blockDeviceMappings").([]any)[0].(map[string]any)["deviceName"], "/dev/xvda", nil, ""},
		{"kubeletConfiguration → class kubelet", at(cclass, "spec", "kubelet", "maxPods"), int64(58), cpool, "kubelet settings moved to EC2NodeClass general"},
		{"--role sets the role", at(class, "spec", "role"), "KarpenterNodeRole-demo", nil, ""},
		{"--instance-profile sets the profile", at(cclass, "spec", "instanceProfile"), "general-nodes", nil, ""},
		{"v1beta1 WhenUnderutilized → WhenEmptyOrUnderutilized", at(bpool, "spec", "disruption", "consolidationPolicy"), "WhenEmptyOrUnderutilized", bpool, "WhenUnderutilized"},
		{"v1beta1 disruption.expireAfter → template", at(bpool, "spec", "template", "spec", "expireAfter"), "720h", bpool, "expireAfter moved"},
		{"v1beta1 nodeClassRef gets a group", at(bpool, "spec", "template", "spec", "nodeClassRef", "group"), "karpenter.k8s.aws", nil, ""},
		{"v1beta1 kubelet → class", at(bclass, "spec", "kubelet", "maxPods"), int64(110), bpool, "kubelet settings moved"},
		{"v1beta1 amiFamily → alias", at(bclass, "spec", "amiSelectorTerms").([]any)[0].(map[string]any)["alias"], "al2@latest", bclass, "became alias"},
		{"v1beta1 role kept", at(bclass, "spec", "role"), "KarpenterNodeRole-demo", nil, ""},
	}
	for _, c := range cases {
		if fmtAny(c.got) != fmtAny(c.want) {
			t.Errorf("%s: got %v (%T), want %v", c.rule, c.got, c.got, c.want)
		}
		if c.note != nil && !noted(c.note, c.noteText) {
			t.Errorf("%s: no note saying %q on %s %s: %q", c.rule, c.noteText, c.note.Kind, c.note.Name, c.note.Notes)
		}
	}
	if at(bpool, "spec", "disruption", "expireAfter") != nil || at(bpool, "spec", "template", "spec", "kubelet") != nil {
		t.Errorf("v1beta1 fields v1 moved are still on the pool: %v", at(bpool, "spec"))
	}
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// Input it cannot convert is refused with what to do, never dropped.
func TestConversionErrors(t *testing.T) {
	cases := map[string]struct{ input, want string }{
		"no identity": {`{"apiVersion":"karpenter.k8s.aws/v1alpha1","kind":"AWSNodeTemplate","metadata":{"name":"x"},"spec":{"subnetSelector":{"a":"b"},"securityGroupSelector":{"a":"b"}}}`,
			"EC2NodeClass x has no role or instanceProfile"},
		"unknown kind": {`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"}}`, "Deployment web (apps/v1) is not a Karpenter Provisioner"},
		"already v1":   {`{"apiVersion":"karpenter.sh/v1","kind":"NodePool","metadata":{"name":"p"}}`, "NodePool p is already karpenter v1"},
		"both TTL and consolidation": {`{"apiVersion":"karpenter.sh/v1alpha5","kind":"Provisioner","metadata":{"name":"p"},"spec":{"ttlSecondsAfterEmpty":30,"consolidation":{"enabled":true},"providerRef":{"name":"c"}}}`,
			"sets both ttlSecondsAfterEmpty and consolidation.enabled"},
		"no provider": {`{"apiVersion":"karpenter.sh/v1alpha5","kind":"Provisioner","metadata":{"name":"p"},"spec":{}}`, "has neither providerRef nor provider"},
		"kubelet conflict": {`{"apiVersion":"v1","kind":"List","items":[
			{"apiVersion":"karpenter.sh/v1alpha5","kind":"Provisioner","metadata":{"name":"a"},"spec":{"providerRef":{"name":"c"},"kubeletConfiguration":{"maxPods":10}}},
			{"apiVersion":"karpenter.sh/v1alpha5","kind":"Provisioner","metadata":{"name":"b"},"spec":{"providerRef":{"name":"c"},"kubeletConfiguration":{"maxPods":20}}},
			{"apiVersion":"karpenter.k8s.aws/v1alpha1","kind":"AWSNodeTemplate","metadata":{"name":"c"},"spec":{"subnetSelector":{"a":"b"},"securityGroupSelector":{"a":"b"},"instanceProfile":"p"}}]}`,
			"share EC2NodeClass c; v1 keeps kubelet settings on the class, so give one of them its own class first"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			docs, err := Decode(strings.NewReader(c.input))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := Convert(docs, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want one saying %q", err, c.want)
			}
		})
	}
}

// What migrate writes is accepted by the CRDs Dovetail installs (and Karpenter v1's,
// which they mirror), on a real kube-apiserver.
func TestOutputIsAcceptedByTheCRDs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts kube-apiserver")
	}
	api := testenv.StartAPIServer(t)
	for _, file := range []string{"v1alpha5-getting-started.yaml", "v1alpha5-inline-provider.yaml", "v1alpha5-consolidation.yaml", "v1beta1-getting-started.yaml"} {
		t.Run(file, func(t *testing.T) {
			res := convertFile(t, file, Options{Role: "KarpenterNodeRole-demo"})
			var out bytes.Buffer
			if err := WriteYAML(&out, res); err != nil {
				t.Fatal(err)
			}
			docs, err := Decode(&out)
			if err != nil {
				t.Fatalf("the output does not read back: %v\n%s", err, out.String())
			}
			if len(docs) != len(res.Objects) {
				t.Fatalf("%d documents written for %d objects", len(docs), len(res.Objects))
			}
			for _, d := range docs {
				u := &unstructured.Unstructured{Object: d}
				if err := api.Client.Create(context.Background(), u, client.DryRunAll); err != nil {
					t.Errorf("%s %s refused: %v\n%s", u.GetKind(), u.GetName(), err, out.String())
				}
			}
		})
	}
}
