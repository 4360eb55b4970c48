package userdata

import (
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
)

func base(family string, custom *string) Options {
	return Options{
		Family: family, ClusterName: "demo", ClusterEndpoint: "https://demo.example", ClusterCABundle: "Q0E=", ClusterCIDR: "10.100.0.0/16",
		Kubelet: &awsv1.KubeletConfiguration{ClusterDNS: []string{"10.100.0.10"}, SystemReserved: map[string]string{"cpu": "100m"}},
		MaxPods: 29,
		Labels:  map[string]string{"karpenter.sh/nodepool": "general", "team": "billing"},
		Taints:  []corev1.Taint{{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}},
		Custom:  custom,
	}
}

// mimeParts parses rendered MIME user data back into (content type, body) pairs.
func mimeParts(t *testing.T, doc string) [][2]string {
	t.Helper()
	msg, err := mail.ReadMessage(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("user data is not MIME: %v\n%s", err, doc)
	}
	_, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil {
		t.Fatal(err)
	}
	r := multipart.NewReader(msg.Body, params["boundary"])
	var out [][2]string
	for {
		p, err := r.NextPart()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(p)
		out = append(out, [2]string{p.Header.Get("Content-Type"), string(b)})
	}
}

func TestAL2023NodeConfigAfterCustomParts(t *testing.T) {
	custom := "#!/bin/bash\necho hello\n"
	doc, err := Render(base(FamilyAL2023, &custom))
	if err != nil {
		t.Fatal(err)
	}
	parts := mimeParts(t, doc)
	if len(parts) != 2 || !strings.HasPrefix(parts[0][0], "text/x-shellscript") || parts[0][1] != custom || parts[1][0] != "application/node.eks.aws" {
		t.Fatalf("want the class's script then a NodeConfig, got %q", parts)
	}
	var nc struct {
		Spec struct {
			Cluster struct{ Name, APIServerEndpoint, CertificateAuthority, CIDR string }
			Kubelet struct {
				Config map[string]any
				Flags  []string
			}
		}
	}
	if err := yaml.Unmarshal([]byte(parts[1][1]), &nc); err != nil {
		t.Fatal(err)
	}
	c := nc.Spec.Cluster
	if c.Name != "demo" || c.APIServerEndpoint != "https://demo.example" || c.CertificateAuthority != "Q0E=" || c.CIDR != "10.100.0.0/16" {
		t.Errorf("cluster = %+v", c)
	}
	if nc.Spec.Kubelet.Config["maxPods"] != float64(29) {
		t.Errorf("maxPods = %v", nc.Spec.Kubelet.Config["maxPods"])
	}
	if taints, _ := nc.Spec.Kubelet.Config["registerWithTaints"].([]any); len(taints) != 1 {
		t.Errorf("registerWithTaints = %v", nc.Spec.Kubelet.Config["registerWithTaints"])
	}
	if want := "--node-labels=karpenter.sh/nodepool=general,team=billing"; len(nc.Spec.Kubelet.Flags) != 1 || nc.Spec.Kubelet.Flags[0] != want {
		t.Errorf("flags = %v, want %s", nc.Spec.Kubelet.Flags, want)
	}
}

func TestAL2023KeepsTheClassMIMEParts(t *testing.T) {
	custom := "MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"BOUNDARY\"\n\n--BOUNDARY\nContent-Type: application/node.eks.aws\n\napiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      shutdownGracePeriod: 30s\n--BOUNDARY--\n"
	doc, err := Render(base(FamilyAL2023, &custom))
	if err != nil {
		t.Fatal(err)
	}
	parts := mimeParts(t, doc)
	if len(parts) != 2 || !strings.Contains(parts[0][1], "shutdownGracePeriod: 30s") {
		t.Fatalf("the class's NodeConfig part was not kept first: %q", parts)
	}
	bad := "MIME-Version: 1.0\nContent-Type: text/plain\n\nhello"
	if _, err := Render(base(FamilyAL2023, &bad)); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("non-multipart MIME: err = %v, want one naming spec.userData", err)
	}
}

func TestAL2Bootstrap(t *testing.T) {
	doc, err := Render(base(FamilyAL2, nil))
	if err != nil {
		t.Fatal(err)
	}
	parts := mimeParts(t, doc)
	if len(parts) != 1 {
		t.Fatalf("parts = %q", parts)
	}
	script := parts[0][1]
	for _, want := range []string{"/etc/eks/bootstrap.sh 'demo' --apiserver-endpoint 'https://demo.example' --b64-cluster-ca 'Q0E='", "--dns-cluster-ip '10.100.0.10'",
		"--use-max-pods false", "--max-pods=29", `--node-labels="karpenter.sh/nodepool=general,team=billing"`, `--register-with-taints="dedicated=gpu:NoSchedule"`, "--system-reserved=cpu=100m"} {
		if !strings.Contains(script, want) {
			t.Errorf("bootstrap script lacks %q:\n%s", want, script)
		}
	}
}

func TestBottlerocketMergesSettings(t *testing.T) {
	custom := "[settings.kubernetes]\nallowed-unsafe-sysctls = [\"net.core.somaxconn\"]\n[settings.host-containers.admin]\nenabled = true\n"
	doc, err := Render(base(FamilyBottlerocket, &custom))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Settings struct {
			Kubernetes map[string]any `toml:"kubernetes"`
			Host       map[string]any `toml:"host-containers"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(doc, &got); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	k := got.Settings.Kubernetes
	if k["cluster-name"] != "demo" || k["api-server"] != "https://demo.example" || k["max-pods"] != int64(29) || k["cluster-dns-ip"] != "10.100.0.10" {
		t.Errorf("kubernetes settings = %v", k)
	}
	if k["allowed-unsafe-sysctls"] == nil || got.Settings.Host["admin"] == nil {
		t.Errorf("the class's own settings were dropped:\n%s", doc)
	}
	if taints := k["node-taints"].(map[string]any)["dedicated"].([]any); len(taints) != 1 || taints[0] != "gpu:NoSchedule" {
		t.Errorf("node-taints = %v", k["node-taints"])
	}
	bad := "not = [toml"
	if _, err := Render(base(FamilyBottlerocket, &bad)); err == nil || !strings.Contains(err.Error(), "spec.userData") {
		t.Errorf("bad TOML: err = %v", err)
	}
}

func TestCustomPassesThroughAndRenderIsStable(t *testing.T) {
	custom := "anything at all"
	if doc, err := Render(base(FamilyCustom, &custom)); err != nil || doc != custom {
		t.Errorf("Custom = %q, %v", doc, err)
	}
	for _, f := range []string{FamilyAL2, FamilyAL2023, FamilyBottlerocket, FamilyWindows2022} {
		a, _ := Render(base(f, nil))
		b, _ := Render(base(f, nil))
		if a != b {
			t.Errorf("%s renders differently for equal input, which would make a launch template per launch", f)
		}
	}
	if _, err := Render(Options{Family: "Windows2016"}); err == nil {
		t.Error("unknown family accepted")
	}
}

// TestWindowsUserData is Karpenter's Windows bootstrap: the class's PowerShell
// first, then Start-EKSBootstrap.ps1 with the cluster, the kubelet's flags and the
// cluster DNS, in one <powershell> block.
func TestWindowsUserData(t *testing.T) {
	custom := `Write-Host "Running custom user data script"`
	o := base(FamilyWindows2022, &custom)
	o.Kubelet = &awsv1.KubeletConfiguration{ClusterDNS: []string{"10.0.100.10"}, KubeReserved: map[string]string{"memory": "1Gi"}}
	doc, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	want := "<powershell>\n" + custom + "\n" +
		`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n" +
		"& $EKSBootstrapScriptFile -EKSClusterName '" + o.ClusterName + "' -APIServerEndpoint '" + o.ClusterEndpoint + "' -Base64ClusterCA '" + o.ClusterCABundle + "'" +
		" -KubeletExtraArgs '--max-pods=" + fmt.Sprint(o.MaxPods) + " --node-labels=" + fmt.Sprintf("%q", labelFlag(o.Labels)) + " --register-with-taints=" + fmt.Sprintf("%q", taintFlag(o.Taints)) +
		" --kube-reserved=memory=1Gi' -DNSClusterIP '10.0.100.10'\n</powershell>"
	if doc != want {
		t.Errorf("user data\n%s\nwant\n%s", doc, want)
	}
	tagged := "<powershell>Write-Host hi</powershell>"
	if _, err := Render(base(FamilyWindows2019, &tagged)); err == nil || !strings.Contains(err.Error(), "remove its own <powershell> tags") {
		t.Errorf("user data with its own tags: %v", err)
	}
}

// Every kubelet field of the class reaches the node on every family that has a
// place for it, not only on AL2023.
func TestEveryKubeletFieldReachesEachFamily(t *testing.T) {
	i32 := func(v int32) *int32 { return &v }
	no := false
	full := func(family string) Options {
		o := base(family, nil)
		o.Kubelet = &awsv1.KubeletConfiguration{
			ClusterDNS: []string{"10.100.0.10"}, PodsPerCore: i32(4),
			SystemReserved: map[string]string{"cpu": "100m"}, KubeReserved: map[string]string{"memory": "200Mi"},
			EvictionHard: map[string]string{"memory.available": "5%"}, EvictionSoft: map[string]string{"nodefs.available": "15%"},
			EvictionSoftGracePeriod:   map[string]metav1.Duration{"nodefs.available": {Duration: 90 * time.Second}},
			EvictionMaxPodGracePeriod: i32(60), ImageGCHighThresholdPercent: i32(85), ImageGCLowThresholdPercent: i32(70), CPUCFSQuota: &no,
		}
		return o
	}

	doc, err := Render(full(FamilyAL2))
	if err != nil {
		t.Fatal(err)
	}
	script := mimeParts(t, doc)[0][1]
	for _, want := range []string{"--pods-per-core=4", "--kube-reserved=memory=200Mi", "--eviction-hard=memory.available<5%", "--eviction-soft=nodefs.available<15%",
		"--eviction-soft-grace-period=nodefs.available=1m30s", "--eviction-max-pod-grace-period=60", "--image-gc-high-threshold=85", "--image-gc-low-threshold=70", "--cpu-cfs-quota=false"} {
		if !strings.Contains(script, want) {
			t.Errorf("AL2 bootstrap lacks %q:\n%s", want, script)
		}
	}

	doc, err = Render(full(FamilyBottlerocket))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Settings struct {
			Kubernetes map[string]any `toml:"kubernetes"`
		} `toml:"settings"`
	}
	if _, err := toml.Decode(doc, &got); err != nil {
		t.Fatalf("%v\n%s", err, doc)
	}
	k := got.Settings.Kubernetes
	want := map[string]any{"pods-per-core": int64(4), "eviction-max-pod-grace-period": int64(60), "image-gc-high-threshold-percent": "85",
		"image-gc-low-threshold-percent": "70", "cpu-cfs-quota-enforced": false}
	for key, v := range want {
		if k[key] != v {
			t.Errorf("Bottlerocket %s = %#v, want %#v", key, k[key], v)
		}
	}
	for key, sub := range map[string][2]string{"eviction-soft": {"nodefs.available", "15%"}, "eviction-soft-grace-period": {"nodefs.available", "1m30s"},
		"kube-reserved": {"memory", "200Mi"}, "eviction-hard": {"memory.available", "5%"}} {
		if m, _ := k[key].(map[string]any); m[sub[0]] != sub[1] {
			t.Errorf("Bottlerocket %s = %v, want %s=%s", key, k[key], sub[0], sub[1])
		}
	}
}

// instanceStorePolicy RAID0 is carried out by each family's own mechanism.
func TestRAID0OnEachFamily(t *testing.T) {
	raid := func(family string) string {
		o := base(family, nil)
		o.RAID0 = true
		doc, err := Render(o)
		if err != nil {
			t.Fatal(err)
		}
		return doc
	}
	if doc := raid(FamilyAL2); !strings.Contains(mimeParts(t, doc)[0][1], "--local-disks raid0") {
		t.Errorf("AL2 bootstrap does not stripe the local disks:\n%s", doc)
	}
	parts := mimeParts(t, raid(FamilyAL2023))
	var cfg struct {
		Spec struct {
			Instance struct {
				LocalStorage struct {
					Strategy string `json:"strategy"`
				} `json:"localStorage"`
			} `json:"instance"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(parts[len(parts)-1][1]), &cfg); err != nil || cfg.Spec.Instance.LocalStorage.Strategy != "RAID0" {
		t.Errorf("AL2023 NodeConfig local storage strategy %q (%v):\n%s", cfg.Spec.Instance.LocalStorage.Strategy, err, parts[len(parts)-1][1])
	}
	var br struct {
		Settings struct {
			Bootstrap map[string]struct {
				Commands  [][]string `toml:"commands"`
				Mode      string     `toml:"mode"`
				Essential bool       `toml:"essential"`
			} `toml:"bootstrap-commands"`
		} `toml:"settings"`
	}
	doc := raid(FamilyBottlerocket)
	if _, err := toml.Decode(doc, &br); err != nil {
		t.Fatal(err)
	}
	mount, ok := br.Settings.Bootstrap["000-mount-instance-storage"]
	if !ok || len(mount.Commands) != 2 || strings.Join(mount.Commands[0], " ") != "apiclient ephemeral-storage init" || mount.Mode != "always" || !mount.Essential {
		t.Errorf("Bottlerocket does not set up the instance store:\n%s", doc)
	}
	// Without the policy nothing of it appears.
	if doc := mimeParts(t, func() string { d, _ := Render(base(FamilyAL2, nil)); return d }())[0][1]; strings.Contains(doc, "local-disks") {
		t.Errorf("AL2 stripes local disks without instanceStorePolicy")
	}
}

// TestAL2023FreeFormKubelet: v1.15's free-form kubelet fields reach nodeadm's
// NodeConfig as given, beside the typed ones; the taints stay the claim's.
func TestAL2023FreeFormKubelet(t *testing.T) {
	o := base(FamilyAL2023, nil)
	o.Kubelet.Unmanaged = map[string]apiextensionsv1.JSON{"shutdownGracePeriod": {Raw: []byte(`"30s"`)}, "registerWithTaints": {Raw: []byte(`[]`)}}
	doc, err := Render(o)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"shutdownGracePeriod: 30s", "maxPods: 29", "key: dedicated"} {
		if !strings.Contains(doc, want) {
			t.Errorf("NodeConfig lacks %q:\n%s", want, doc)
		}
	}
}
