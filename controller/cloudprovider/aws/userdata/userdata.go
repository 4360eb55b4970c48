// Package userdata renders the user data that makes an EC2 instance join the cluster
// as a node, for each AMI family, merged with what the EC2NodeClass adds. The output
// is deterministic, so equal inputs map to one launch template.
package userdata

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/mail"
	"net/textproto"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
)

// AMI families, as amiFamily and aliases name them.
const (
	FamilyAL2          = "AL2"
	FamilyAL2023       = "AL2023"
	FamilyBottlerocket = "Bottlerocket"
	FamilyCustom       = "Custom"
	FamilyWindows2019  = "Windows2019"
	FamilyWindows2022  = "Windows2022"
	FamilyWindows2025  = "Windows2025"
)

// WindowsBuilds are the node.kubernetes.io/windows-build of each Windows family.
var WindowsBuilds = map[string]string{FamilyWindows2019: "10.0.17763", FamilyWindows2022: "10.0.20348", FamilyWindows2025: "10.0.26100"}

// IsWindows reports whether the family boots Windows Server.
func IsWindows(family string) bool { _, ok := WindowsBuilds[family]; return ok }

// FamilyOfAlias maps an alias family ("al2023") to the AMI family.
func FamilyOfAlias(alias string) (string, bool) {
	family, _, _ := strings.Cut(alias, "@")
	switch strings.ToLower(family) {
	case "al2":
		return FamilyAL2, true
	case "al2023":
		return FamilyAL2023, true
	case "bottlerocket":
		return FamilyBottlerocket, true
	case "windows2019":
		return FamilyWindows2019, true
	case "windows2022":
		return FamilyWindows2022, true
	case "windows2025":
		return FamilyWindows2025, true
	}
	return "", false
}

// FamilyOf is the class's AMI family: its alias's, else its amiFamily, else Custom.
func FamilyOf(class *awsv1.EC2NodeClass) string {
	for _, t := range class.Spec.AMISelectorTerms {
		if f, ok := FamilyOfAlias(t.Alias); ok && t.Alias != "" {
			return f
		}
	}
	if class.Spec.AMIFamily != nil {
		return *class.Spec.AMIFamily
	}
	return FamilyCustom
}

// Options are what a node needs to join.
type Options struct {
	Family          string
	ClusterName     string
	ClusterEndpoint string
	// ClusterCABundle is base64 PEM, as EKS returns it.
	ClusterCABundle string
	ClusterCIDR     string
	Kubelet         *awsv1.KubeletConfiguration
	// MaxPods is the kubelet's pod limit; 0 leaves the AMI's default.
	MaxPods int32
	Labels  map[string]string
	Taints  []corev1.Taint
	// Custom is the class's spec.userData.
	Custom *string
	// RAID0 is the class's instanceStorePolicy RAID0: the instance-store disks are
	// striped into one volume that holds the kubelet's and containerd's data.
	RAID0 bool
}

// Render returns the user data (not base64-encoded).
func Render(o Options) (string, error) {
	switch o.Family {
	case FamilyAL2:
		return renderAL2(o)
	case FamilyAL2023:
		return renderAL2023(o)
	case FamilyBottlerocket:
		return renderBottlerocket(o)
	case FamilyWindows2019, FamilyWindows2022, FamilyWindows2025:
		return renderWindows(o)
	case FamilyCustom:
		if o.Custom == nil {
			return "", nil
		}
		return *o.Custom, nil
	}
	return "", fmt.Errorf("amiFamily %q is not one of AL2, AL2023, Bottlerocket, Windows2019, Windows2022, Windows2025, Custom", o.Family)
}

const boundary = "//"

// part is one MIME part of multipart user data.
type part struct {
	contentType string
	body        string
}

// customParts splits the class's user data into MIME parts: a MIME document gives
// its parts, anything else is one part of the type its first line suggests.
func customParts(custom *string) ([]part, error) {
	if custom == nil || strings.TrimSpace(*custom) == "" {
		return nil, nil
	}
	text := *custom
	if !strings.HasPrefix(strings.TrimSpace(text), "MIME-Version:") {
		ct := `text/x-shellscript; charset="us-ascii"`
		if strings.HasPrefix(strings.TrimSpace(text), "apiVersion: node.eks.aws") {
			ct = "application/node.eks.aws"
		}
		return []part{{contentType: ct, body: text}}, nil
	}
	msg, err := mail.ReadMessage(strings.NewReader(strings.TrimSpace(text) + "\n"))
	if err != nil {
		return nil, fmt.Errorf("spec.userData looks like MIME but does not parse (%v); fix its headers or give a plain script", err)
	}
	mediaType, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || !strings.HasPrefix(mediaType, "multipart/") {
		return nil, fmt.Errorf("spec.userData is MIME but not multipart (Content-Type %q); use multipart/mixed with a boundary", msg.Header.Get("Content-Type"))
	}
	reader := multipart.NewReader(msg.Body, params["boundary"])
	var parts []part
	for {
		p, err := reader.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("spec.userData: reading MIME part %d, %w", len(parts)+1, err)
		}
		body, err := io.ReadAll(p)
		if err != nil {
			return nil, fmt.Errorf("spec.userData: reading MIME part %d, %w", len(parts)+1, err)
		}
		parts = append(parts, part{contentType: p.Header.Get("Content-Type"), body: string(body)})
	}
	return parts, nil
}

func writeMIME(parts []part) (string, error) {
	var buf bytes.Buffer
	buf.WriteString("MIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\n\n")
	w := multipart.NewWriter(&buf)
	if err := w.SetBoundary(boundary); err != nil {
		return "", err
	}
	for _, p := range parts {
		pw, err := w.CreatePart(textproto.MIMEHeader{"Content-Type": {p.contentType}})
		if err != nil {
			return "", err
		}
		if _, err := io.WriteString(pw, p.body); err != nil {
			return "", err
		}
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return buf.String(), nil
}

// labelFlag renders labels as kubelet's --node-labels value, sorted.
func labelFlag(labels map[string]string) string { return joinSorted(labels, "=") }

// joinSorted renders a map as "k<sep>v,..." in key order.
func joinSorted(m map[string]string, sep string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	pairs := make([]string, len(keys))
	for i, k := range keys {
		pairs[i] = k + sep + m[k]
	}
	return strings.Join(pairs, ",")
}

func taintFlag(taints []corev1.Taint) string {
	out := make([]string, len(taints))
	for i, t := range taints {
		out[i] = t.ToString()
	}
	return strings.Join(out, ",")
}

func mapFlag(m map[string]string) string { return labelFlag(m) }

func renderAL2(o Options) (string, error) {
	parts, err := customParts(o.Custom)
	if err != nil {
		return "", err
	}
	var script strings.Builder
	script.WriteString("#!/bin/bash -xe\nexec > >(tee /var/log/user-data.log|logger -t user-data -s 2>/dev/console) 2>&1\n")
	fmt.Fprintf(&script, "/etc/eks/bootstrap.sh '%s' --apiserver-endpoint '%s' --b64-cluster-ca '%s'", o.ClusterName, o.ClusterEndpoint, o.ClusterCABundle)
	if k := o.Kubelet; k != nil && len(k.ClusterDNS) > 0 {
		fmt.Fprintf(&script, " \\\n--dns-cluster-ip '%s'", k.ClusterDNS[0])
	}
	if o.RAID0 {
		script.WriteString(" \\\n--local-disks raid0")
	}
	if o.MaxPods > 0 {
		script.WriteString(" \\\n--use-max-pods false")
	}
	args := kubeletFlags(o)
	if len(args) > 0 {
		fmt.Fprintf(&script, " \\\n--kubelet-extra-args '%s'", strings.Join(args, " "))
	}
	script.WriteString("\n")
	return writeMIME(append(parts, part{contentType: `text/x-shellscript; charset="us-ascii"`, body: script.String()}))
}

// kubeletFlags are the kubelet's command-line flags for what the options set, in
// the order Karpenter writes them.
func kubeletFlags(o Options) []string {
	var args []string
	if o.MaxPods > 0 {
		args = append(args, fmt.Sprintf("--max-pods=%d", o.MaxPods))
	}
	if len(o.Labels) > 0 {
		args = append(args, fmt.Sprintf("--node-labels=%q", labelFlag(o.Labels)))
	}
	if len(o.Taints) > 0 {
		args = append(args, fmt.Sprintf("--register-with-taints=%q", taintFlag(o.Taints)))
	}
	k := o.Kubelet
	if k == nil {
		return args
	}
	if len(k.SystemReserved) > 0 {
		args = append(args, "--system-reserved="+mapFlag(k.SystemReserved))
	}
	if len(k.KubeReserved) > 0 {
		args = append(args, "--kube-reserved="+mapFlag(k.KubeReserved))
	}
	if len(k.EvictionHard) > 0 {
		args = append(args, "--eviction-hard="+evictionFlag(k.EvictionHard))
	}
	if len(k.EvictionSoft) > 0 {
		args = append(args, "--eviction-soft="+evictionFlag(k.EvictionSoft))
	}
	if len(k.EvictionSoftGracePeriod) > 0 {
		args = append(args, "--eviction-soft-grace-period="+mapFlag(durations(k.EvictionSoftGracePeriod)))
	}
	if k.EvictionMaxPodGracePeriod != nil {
		args = append(args, fmt.Sprintf("--eviction-max-pod-grace-period=%d", *k.EvictionMaxPodGracePeriod))
	}
	if k.PodsPerCore != nil {
		args = append(args, fmt.Sprintf("--pods-per-core=%d", *k.PodsPerCore))
	}
	if k.ImageGCHighThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-high-threshold=%d", *k.ImageGCHighThresholdPercent))
	}
	if k.ImageGCLowThresholdPercent != nil {
		args = append(args, fmt.Sprintf("--image-gc-low-threshold=%d", *k.ImageGCLowThresholdPercent))
	}
	if k.CPUCFSQuota != nil {
		args = append(args, fmt.Sprintf("--cpu-cfs-quota=%t", *k.CPUCFSQuota))
	}
	return args
}

// renderWindows is the EKS Windows AMI's bootstrap: one PowerShell block, the
// class's own commands first (plain PowerShell, without <powershell> tags), then
// Start-EKSBootstrap.ps1 with the cluster and the kubelet's flags, as Karpenter
// writes it.
func renderWindows(o Options) (string, error) {
	var b strings.Builder
	b.WriteString("<powershell>\n")
	if o.Custom != nil && strings.TrimSpace(*o.Custom) != "" {
		custom := strings.TrimSpace(*o.Custom)
		if strings.HasPrefix(custom, "<powershell>") {
			return "", fmt.Errorf("spec.userData of a Windows family is PowerShell put before the bootstrap, inside Dovetail's <powershell> block; remove its own <powershell> tags")
		}
		b.WriteString(custom + "\n")
	}
	b.WriteString(`[string]$EKSBootstrapScriptFile = "$env:ProgramFiles\Amazon\EKS\Start-EKSBootstrap.ps1"` + "\n")
	fmt.Fprintf(&b, "& $EKSBootstrapScriptFile -EKSClusterName '%s' -APIServerEndpoint '%s'", o.ClusterName, o.ClusterEndpoint)
	if o.ClusterCABundle != "" {
		fmt.Fprintf(&b, " -Base64ClusterCA '%s'", o.ClusterCABundle)
	}
	if args := kubeletFlags(o); len(args) > 0 {
		fmt.Fprintf(&b, " -KubeletExtraArgs '%s'", strings.Join(args, " "))
	}
	if k := o.Kubelet; k != nil && len(k.ClusterDNS) > 0 {
		fmt.Fprintf(&b, " -DNSClusterIP '%s'", k.ClusterDNS[0])
	}
	b.WriteString("\n</powershell>")
	return b.String(), nil
}

func evictionFlag(m map[string]string) string { return joinSorted(m, "<") }

// durations writes each signal's grace period as the kubelet parses it.
func durations(m map[string]metav1.Duration) map[string]string {
	out := make(map[string]string, len(m))
	for k, d := range m {
		out[k] = d.Duration.String()
	}
	return out
}

// nodeConfig is nodeadm's NodeConfig, as much of it as nodes need.
type nodeConfig struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Spec       nodeConfigSpec `json:"spec"`
}

type nodeConfigSpec struct {
	Cluster struct {
		Name                 string `json:"name"`
		APIServerEndpoint    string `json:"apiServerEndpoint"`
		CertificateAuthority string `json:"certificateAuthority"`
		CIDR                 string `json:"cidr,omitempty"`
	} `json:"cluster"`
	Kubelet struct {
		Config map[string]any `json:"config,omitempty"`
		Flags  []string       `json:"flags,omitempty"`
	} `json:"kubelet"`
	Instance *nodeConfigInstance `json:"instance,omitempty"`
}

type nodeConfigInstance struct {
	LocalStorage struct {
		Strategy string `json:"strategy"`
	} `json:"localStorage"`
}

func renderAL2023(o Options) (string, error) {
	parts, err := customParts(o.Custom)
	if err != nil {
		return "", err
	}
	nc := nodeConfig{APIVersion: "node.eks.aws/v1alpha1", Kind: "NodeConfig"}
	nc.Spec.Cluster.Name = o.ClusterName
	nc.Spec.Cluster.APIServerEndpoint = o.ClusterEndpoint
	nc.Spec.Cluster.CertificateAuthority = o.ClusterCABundle
	nc.Spec.Cluster.CIDR = o.ClusterCIDR
	if o.RAID0 {
		nc.Spec.Instance = &nodeConfigInstance{}
		nc.Spec.Instance.LocalStorage.Strategy = "RAID0"
	}
	config := map[string]any{}
	if o.MaxPods > 0 {
		config["maxPods"] = o.MaxPods
	}
	if k := o.Kubelet; k != nil {
		if len(k.ClusterDNS) > 0 {
			config["clusterDNS"] = k.ClusterDNS
		}
		if k.PodsPerCore != nil {
			config["podsPerCore"] = *k.PodsPerCore
		}
		for name, m := range map[string]map[string]string{"systemReserved": k.SystemReserved, "kubeReserved": k.KubeReserved, "evictionHard": k.EvictionHard, "evictionSoft": k.EvictionSoft} {
			if len(m) > 0 {
				config[name] = m
			}
		}
		if len(k.EvictionSoftGracePeriod) > 0 {
			config["evictionSoftGracePeriod"] = durations(k.EvictionSoftGracePeriod)
		}
		if k.EvictionMaxPodGracePeriod != nil {
			config["evictionMaxPodGracePeriod"] = *k.EvictionMaxPodGracePeriod
		}
		if k.ImageGCHighThresholdPercent != nil {
			config["imageGCHighThresholdPercent"] = *k.ImageGCHighThresholdPercent
		}
		if k.ImageGCLowThresholdPercent != nil {
			config["imageGCLowThresholdPercent"] = *k.ImageGCLowThresholdPercent
		}
		if k.CPUCFSQuota != nil {
			config["cpuCFSQuota"] = *k.CPUCFSQuota
		}
		// The class's other kubelet fields go to nodeadm as given; the taints the
		// node registers with stay the claim's.
		for name, v := range k.Unmanaged {
			if _, set := config[name]; !set {
				config[name] = json.RawMessage(v.Raw)
			}
		}
	}
	if len(o.Taints) > 0 {
		config["registerWithTaints"] = o.Taints
	}
	if len(config) > 0 {
		nc.Spec.Kubelet.Config = config
	}
	if len(o.Labels) > 0 {
		nc.Spec.Kubelet.Flags = []string{"--node-labels=" + labelFlag(o.Labels)}
	}
	doc, err := yaml.Marshal(nc)
	if err != nil {
		return "", fmt.Errorf("rendering NodeConfig, %w", err)
	}
	// nodeadm merges NodeConfigs in order, so the class's own come first and ours,
	// which must name this cluster, last.
	return writeMIME(append(parts, part{contentType: "application/node.eks.aws", body: string(doc)}))
}

func renderBottlerocket(o Options) (string, error) {
	settings := map[string]any{}
	if o.Custom != nil && strings.TrimSpace(*o.Custom) != "" {
		if _, err := toml.Decode(*o.Custom, &settings); err != nil {
			return "", fmt.Errorf("spec.userData must be Bottlerocket TOML settings for the Bottlerocket family, %w", err)
		}
	}
	if o.RAID0 {
		// Bottlerocket's API client builds the array and moves the kubelet's and
		// containerd's directories onto it, on every boot.
		table(table(settings, "settings"), "bootstrap-commands")["000-mount-instance-storage"] = map[string]any{
			"commands": []any{[]any{"apiclient", "ephemeral-storage", "init"},
				[]any{"apiclient", "ephemeral-storage", "bind", "--dirs", "/var/lib/containerd", "/var/lib/kubelet", "/var/log/pods"}},
			"mode": "always", "essential": true,
		}
	}
	kube := table(table(settings, "settings"), "kubernetes")
	kube["cluster-name"] = o.ClusterName
	kube["api-server"] = o.ClusterEndpoint
	kube["cluster-certificate"] = o.ClusterCABundle
	if o.MaxPods > 0 {
		kube["max-pods"] = int64(o.MaxPods)
	}
	if len(o.Labels) > 0 {
		labels := table(kube, "node-labels")
		for k, v := range o.Labels {
			labels[k] = v
		}
	}
	if len(o.Taints) > 0 {
		taints := table(kube, "node-taints")
		for _, t := range o.Taints {
			v := t.Value + ":" + string(t.Effect)
			existing, _ := taints[t.Key].([]any)
			taints[t.Key] = append(existing, v)
		}
	}
	if k := o.Kubelet; k != nil {
		if len(k.ClusterDNS) > 0 {
			kube["cluster-dns-ip"] = k.ClusterDNS[0]
		}
		for name, m := range map[string]map[string]string{"system-reserved": k.SystemReserved, "kube-reserved": k.KubeReserved, "eviction-hard": k.EvictionHard,
			"eviction-soft": k.EvictionSoft, "eviction-soft-grace-period": durations(k.EvictionSoftGracePeriod)} {
			if len(m) > 0 {
				t := table(kube, name)
				for key, v := range m {
					t[key] = v
				}
			}
		}
		if k.PodsPerCore != nil {
			kube["pods-per-core"] = int64(*k.PodsPerCore)
		}
		if k.EvictionMaxPodGracePeriod != nil {
			kube["eviction-max-pod-grace-period"] = int64(*k.EvictionMaxPodGracePeriod)
		}
		// Bottlerocket takes the image GC thresholds as strings.
		if k.ImageGCHighThresholdPercent != nil {
			kube["image-gc-high-threshold-percent"] = fmt.Sprint(*k.ImageGCHighThresholdPercent)
		}
		if k.ImageGCLowThresholdPercent != nil {
			kube["image-gc-low-threshold-percent"] = fmt.Sprint(*k.ImageGCLowThresholdPercent)
		}
		if k.CPUCFSQuota != nil {
			kube["cpu-cfs-quota-enforced"] = *k.CPUCFSQuota
		}
	}
	var buf bytes.Buffer
	if err := toml.NewEncoder(&buf).Encode(settings); err != nil {
		return "", fmt.Errorf("rendering Bottlerocket settings, %w", err)
	}
	return buf.String(), nil
}

// table returns m[key] as a table, creating it.
func table(m map[string]any, key string) map[string]any {
	if t, ok := m[key].(map[string]any); ok {
		return t
	}
	t := map[string]any{}
	m[key] = t
	return t
}
