package charts_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	"helm.sh/helm/v3/pkg/lint"
	"helm.sh/helm/v3/pkg/lint/support"
	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/templates"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// releasedAppVersion stands for a release's version: make release stamps the chart's
// appVersion (its image's tag) with it.
const releasedAppVersion = "v9.9.9"

// helmTemplate renders charts/dovetail as released (what users install) with `helm
// template --include-crds --namespace <ns> <name> <chart> -f <values file>`, through
// Helm's own install action and values reader.
func helmTemplate(t *testing.T, name, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	return helmTemplateOf(t, true, name, namespace, vals)
}

// helmTemplateOf renders the chart as released, or as it is in the repository (no
// appVersion: no image of its own).
func helmTemplateOf(t *testing.T, released bool, name, namespace string, vals map[string]any) ([]*unstructured.Unstructured, error) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "values.yaml")
	raw, err := yaml.Marshal(vals)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	merged, err := (&values.Options{ValueFiles: []string{file}}).MergeValues(getter.All(cli.New()))
	if err != nil {
		t.Fatal(err)
	}
	chrt, err := loader.Load("dovetail")
	if err != nil {
		t.Fatal(err)
	}
	if released {
		chrt.Metadata.Version, chrt.Metadata.AppVersion = strings.TrimPrefix(releasedAppVersion, "v"), releasedAppVersion
	}
	install := action.NewInstall(&action.Configuration{Log: t.Logf})
	install.DryRun, install.DryRunOption, install.ClientOnly, install.Replace = true, "true", true, true
	install.IncludeCRDs = true
	install.ReleaseName, install.Namespace = name, namespace
	rel, err := install.Run(chrt, merged)
	if err != nil {
		return nil, err
	}
	return decode(t, rel.Manifest), nil
}

func decode(t *testing.T, stream string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(stream), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if err.Error() == "EOF" {
				return out
			}
			t.Fatal(err)
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

func dovetailRender(t *testing.T, v templates.Values) []*unstructured.Unstructured {
	t.Helper()
	var buf strings.Builder
	if err := templates.Render(&buf, v); err != nil {
		t.Fatal(err)
	}
	return decode(t, buf.String())
}

func byKindAndName(objs []*unstructured.Unstructured) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, o := range objs {
		out[o.GetKind()+"/"+o.GetNamespace()+"/"+o.GetName()] = o.Object
	}
	return out
}

func installCases() map[string]templates.Values {
	defaults := templates.DefaultValues()
	defaults.Settings.ClusterName = "demo"
	// What a release's binary defaults to (the tests' binary is built from source and has none).
	defaults.Image = templates.ImageRepository + ":" + releasedAppVersion

	full := templates.DefaultValues()
	full.Name, full.Namespace, full.ServiceAccount = "autoscaler", "kube-autoscaling", "autoscaler-sa"
	full.Image = "registry.example.com:5000/dovetail/controller:v9.9.9@sha256:" + strings.Repeat("ab", 32)
	full.Replicas, full.CPU, full.Memory = 3, "500m", "2Gi"
	full.IRSARoleARN = "arn:aws:iam::123456789012:role/dovetail"
	full.Settings = templates.Settings{ClusterName: "prod", ClusterEndpoint: "https://prod.example.com", AWSRegion: "eu-west-1",
		InterruptionQueue: "prod-interruptions", IsolatedVPC: true, LogLevel: "debug", BatchIdleDuration: "2s", BatchMaxDuration: "20s",
		FeatureGates:               map[string]bool{"SpotToSpotConsolidation": true, "NodeRepair": false},
		AWSEndpoints:               map[string]string{"ec2": "https://ec2.vpce.example.com", "sqs": "https://sqs.vpce.example.com"},
		RootVolumePricePerGiBMonth: "0.1", PublicIPv4PricePerHour: "0", NodeOverheadPricePerHour: "0.005", FewerNodesTolerance: "0.05"}
	full.ExtraChartValues = map[string]any{
		"tolerations":       []any{map[string]any{"key": "dedicated", "operator": "Equal", "value": "system", "effect": "NoSchedule"}},
		"nodeSelector":      map[string]any{"node-role": "system"},
		"priorityClassName": "autoscaler-critical",
		"podAnnotations":    map[string]any{"prometheus.io/scrape": "true"},
		"additionalLabels":  map[string]any{"team": "platform"},
		"controller": map[string]any{
			"env": []any{map[string]any{"name": "HTTPS_PROXY", "value": "http://proxy:3128"}},
		},
		"topologySpreadConstraints": []any{map[string]any{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "DoNotSchedule"}},
		"serviceMonitor":            map[string]any{"enabled": true, "additionalLabels": map[string]any{"release": "prom"}, "endpointConfig": map[string]any{"interval": "15s"}},
	}
	return map[string]templates.Values{"defaults": defaults, "every setting": full}
}

// The chart is the one source: Helm, reading charts/dovetail from disk with a values
// file, makes exactly the objects `dovetail render` (and so dovetail_controller) makes
// for the same values. Both are built from source here, unstamped.
func TestHelmTemplateEqualsDovetailRender(t *testing.T) {
	for name, v := range installCases() {
		t.Run(name, func(t *testing.T) {
			fromHelm, err := helmTemplateOf(t, false, v.Name, v.Namespace, v.ChartValues())
			if err != nil {
				t.Fatal(err)
			}
			fromRender := dovetailRender(t, v)
			if diff := cmp.Diff(byKindAndName(fromRender), byKindAndName(fromHelm)); diff != "" {
				t.Fatalf("dovetail render (-) and helm template (+) differ:\n%s", diff)
			}
			if len(fromHelm) < 12 {
				t.Fatalf("helm rendered %d objects, want the 3 CRDs and at least 9 others", len(fromHelm))
			}
		})
	}
}

// Values named like Karpenter's chart reach the objects they are named for.
func TestKarpenterNamedValuesTakeEffect(t *testing.T) {
	v := installCases()["every setting"]
	objs := byKindAndName(dovetailRender(t, v))
	deploy := objs["Deployment/kube-autoscaling/autoscaler"]
	if deploy == nil {
		t.Fatalf("no Deployment among %v", keys(objs))
	}
	spec := deploy["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)
	container := spec["containers"].([]any)[0].(map[string]any)
	env := map[string]string{}
	for _, e := range container["env"].([]any) {
		m := e.(map[string]any)
		if val, ok := m["value"].(string); ok {
			env[m["name"].(string)] = val
		}
	}
	for k, want := range map[string]string{
		"CLUSTER_NAME": "prod", "CLUSTER_ENDPOINT": "https://prod.example.com", "AWS_REGION": "eu-west-1",
		"INTERRUPTION_QUEUE": "prod-interruptions", "ISOLATED_VPC": "true", "LOG_LEVEL": "debug",
		"BATCH_IDLE_DURATION": "2s", "BATCH_MAX_DURATION": "20s",
		"FEATURE_GATES":                   "NodeRepair=false,SpotToSpotConsolidation=true",
		"AWS_ENDPOINTS":                   "ec2=https://ec2.vpce.example.com,sqs=https://sqs.vpce.example.com",
		"ROOT_VOLUME_PRICE_PER_GIB_MONTH": "0.1", "PUBLIC_IPV4_PRICE_PER_HOUR": "0", "FEWER_NODES_TOLERANCE": "0.05",
		"HTTPS_PROXY": "http://proxy:3128",
	} {
		if env[k] != want {
			t.Errorf("env %s = %q, want %q", k, env[k], want)
		}
	}
	if _, ok := env["NODE_OVERHEAD_PRICE_PER_HOUR"]; ok {
		t.Error("a node cost at the controller's default was rendered")
	}
	if got := container["image"]; got != v.Image {
		t.Errorf("image %v, want %s", got, v.Image)
	}
	// Maps merge with the chart's defaults, as in any Helm chart; lists replace them.
	if got := fmt.Sprintf("%v %v %v", spec["tolerations"], spec["nodeSelector"], spec["priorityClassName"]); got != "[map[effect:NoSchedule key:dedicated operator:Equal value:system]] map[kubernetes.io/os:linux node-role:system] autoscaler-critical" {
		t.Errorf("tolerations, nodeSelector, priorityClassName: %s", got)
	}
	tsc := spec["topologySpreadConstraints"].([]any)[0].(map[string]any)
	if got := fmt.Sprint(tsc["labelSelector"]); got != "map[matchLabels:map[app.kubernetes.io/instance:autoscaler app.kubernetes.io/name:dovetail]]" {
		t.Errorf("a spread constraint without a selector selects %s, want the controller's pods", got)
	}
	meta := deploy["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	if got := fmt.Sprint(meta["annotations"]); got != "map[prometheus.io/scrape:true]" {
		t.Errorf("pod annotations %s", got)
	}
	sa := objs["ServiceAccount/kube-autoscaling/autoscaler-sa"]
	if sa == nil || fmt.Sprint(sa["metadata"].(map[string]any)["annotations"]) != "map[eks.amazonaws.com/role-arn:"+v.IRSARoleARN+"]" {
		t.Errorf("service account %v", sa)
	}
	monitor := objs["ServiceMonitor/kube-autoscaling/autoscaler"]
	if monitor == nil {
		t.Fatalf("serviceMonitor.enabled rendered no ServiceMonitor: %v", keys(objs))
	}
	if got := fmt.Sprintf("%v %v", monitor["spec"].(map[string]any)["endpoints"], monitor["metadata"].(map[string]any)["labels"].(map[string]any)["release"]); got != "[map[interval:15s path:/metrics port:http-metrics]] prom" {
		t.Errorf("service monitor endpoints and release label: %s", got)
	}
	for key, obj := range objs {
		if strings.HasPrefix(key, "CustomResourceDefinition/") {
			continue
		}
		if l := obj["metadata"].(map[string]any)["labels"].(map[string]any); l["team"] != "platform" {
			t.Errorf("%s lacks additionalLabels: %v", key, l)
		}
	}
}

func keys(m map[string]map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// helm install without settings.clusterName fails and says what to set.
func TestHelmRefusesAChartWithoutAClusterName(t *testing.T) {
	_, err := helmTemplate(t, "dovetail", "dovetail", map[string]any{})
	if err == nil || !strings.Contains(err.Error(), "settings.clusterName is required") {
		t.Fatalf("rendering without a cluster name gave %v", err)
	}
}

// A released chart runs the image released with it; the chart as it is in the
// repository is no release and asks for an image rather than guess one.
func TestChartDefaultsToItsReleasesImage(t *testing.T) {
	vals := func() map[string]any { return map[string]any{"settings": map[string]any{"clusterName": "demo"}} }
	objs, err := helmTemplate(t, "dovetail", "dovetail", vals())
	if err != nil {
		t.Fatal(err)
	}
	deploy := deployment(t, objs)
	if deploy == nil {
		t.Fatal("no Deployment rendered")
	}
	if got, want := deploy.Spec.Template.Spec.Containers[0].Image, templates.ImageRepository+":"+releasedAppVersion; got != want {
		t.Errorf("a released chart runs %s, want %s", got, want)
	}
	if got := deploy.Labels["app.kubernetes.io/version"]; got != releasedAppVersion {
		t.Errorf("app.kubernetes.io/version %q, want %s", got, releasedAppVersion)
	}

	_, err = helmTemplateOf(t, false, "dovetail", "dovetail", vals())
	if err == nil || !strings.Contains(err.Error(), "controller.image.tag is required: this chart is not a release") {
		t.Fatalf("the chart from the repository without an image tag gave %v", err)
	}
	withTag := vals()
	withTag["controller"] = map[string]any{"image": map[string]any{"tag": "dev"}}
	if _, err := helmTemplateOf(t, false, "dovetail", "dovetail", withTag); err != nil {
		t.Fatalf("the chart from the repository with controller.image.tag: %v", err)
	}
}

// values.schema.json refuses values the controller would refuse, naming the value,
// before anything is installed.
func TestHelmRefusesBadValuesNamingThem(t *testing.T) {
	for name, c := range map[string]struct {
		vals map[string]any
		want string
	}{
		"log level":    {map[string]any{"logLevel": "verbose"}, "logLevel"},
		"feature gate": {map[string]any{"settings": map[string]any{"featureGates": map[string]any{"drift": true}}}, "featureGates"},
		"replicas":     {map[string]any{"replicas": 0}, "replicas"},
		"duration":     {map[string]any{"settings": map[string]any{"batchIdleDuration": "1 second"}}, "batchIdleDuration"},
		"endpoint":     {map[string]any{"settings": map[string]any{"awsEndpoints": map[string]any{"s3": "https://x"}}}, "awsEndpoints"},
		// A value no template reads would be accepted and ignored.
		"unknown value":          {map[string]any{"podLabel": map[string]any{"team": "a"}}, "podLabel"},
		"unknown setting":        {map[string]any{"settings": map[string]any{"assumeRoleARN": "arn:aws:iam::1:role/x"}}, "assumeRoleARN"},
		"unknown controller key": {map[string]any{"controller": map[string]any{"imagePullPolicy": "Always"}}, "imagePullPolicy"},
		"privileged container":   {map[string]any{"controller": map[string]any{"securityContext": map[string]any{"privileged": true}}}, "privileged"},
		"logs to a file":         {map[string]any{"logOutputPaths": []any{"/var/log/karpenter.log"}}, "logOutputPaths"},
		"memory overhead":        {map[string]any{"settings": map[string]any{"vmMemoryOverheadPercent": 1.5}}, "vmMemoryOverheadPercent"},
		"reserved ENIs":          {map[string]any{"settings": map[string]any{"reservedENIs": "one"}}, "reservedENIs"},
		"preferences ignored":    {map[string]any{"settings": map[string]any{"preferencePolicy": "Ignore"}}, "settings.preferencePolicy: Ignore is not supported yet"},
		"best-effort minValues":  {map[string]any{"settings": map[string]any{"minValuesPolicy": "BestEffort"}}, "settings.minValuesPolicy: BestEffort is not supported yet"},
		"DRA planned":            {map[string]any{"settings": map[string]any{"ignoreDRARequests": false}}, "settings.ignoreDRARequests: false is not supported yet"},
		"cluster state metrics":  {map[string]any{"settings": map[string]any{"disableClusterStateObservability": true}}, "settings.disableClusterStateObservability: true is not supported yet"},
		"CA bundle not PEM":      {map[string]any{"settings": map[string]any{"clusterCABundle": "aGVsbG8="}}, "settings.clusterCABundle: not a base64-encoded PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			vals := c.vals
			settings, _ := vals["settings"].(map[string]any)
			if settings == nil {
				settings = map[string]any{}
				vals["settings"] = settings
			}
			settings["clusterName"] = "demo"
			_, err := helmTemplate(t, "dovetail", "dovetail", vals)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("helm template gave %v; want a schema error naming %s", err, c.want)
			}
		})
	}
}

func TestChartLints(t *testing.T) {
	// The chart in the repository is no release: it lints with the image tag a
	// developer gives it.
	result := lint.All("dovetail", map[string]any{"settings": map[string]any{"clusterName": "demo"}, "controller": map[string]any{"image": map[string]any{"tag": "dev"}}}, "dovetail", false)
	for _, m := range result.Messages {
		if m.Severity >= support.WarningSev {
			t.Errorf("helm lint: %s", m)
		}
	}
}

// What Helm renders installs on a real cluster: kube-apiserver accepts every object
// and the controller's replicas are scheduled and run (on kwok nodes), with values a
// Karpenter user would set.
func TestHelmChartInstallsOnTheLocalStack(t *testing.T) {
	stack := testenv.StartStackWithoutCRDs(t)
	ctx := context.Background()
	kube := stack.Client
	testenv.AddSystemNodes(t, kube, 2)
	if err := kube.Create(ctx, serviceMonitorCRD()); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 30*time.Second, "the ServiceMonitor CRD is served", func() error {
		return kube.List(ctx, &unstructured.UnstructuredList{Object: map[string]any{"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitorList"}})
	})
	raw, err := os.ReadFile("testdata/karpenter-v1-values.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		t.Fatal(err)
	}
	objs, err := helmTemplate(t, "karpenter", "karpenter", vals)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			if err := kube.Create(ctx, o); err != nil {
				t.Fatalf("creating %s: %v", o.GetName(), err)
			}
		}
	}
	testenv.Eventually(t, 30*time.Second, "the CRDs are established", func() error {
		for _, o := range objs {
			if o.GetKind() != "CustomResourceDefinition" {
				continue
			}
			crd := &apiextensionsv1.CustomResourceDefinition{}
			if err := kube.Get(ctx, client.ObjectKey{Name: o.GetName()}, crd); err != nil {
				return err
			}
			established := false
			for _, c := range crd.Status.Conditions {
				established = established || (c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue)
			}
			if !established {
				return fmt.Errorf("%s not established", o.GetName())
			}
		}
		return nil
	})
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			continue
		}
		if err := kube.Create(ctx, o); err != nil {
			t.Fatalf("creating %s %s: %v", o.GetKind(), o.GetName(), err)
		}
	}
	// The release is named karpenter, so its objects are too: a Karpenter user's
	// dashboards and scripts that name karpenter/karpenter keep finding it.
	testenv.Eventually(t, 90*time.Second, "the controller's replicas are available", func() error {
		d := &appsv1.Deployment{}
		if err := kube.Get(ctx, client.ObjectKey{Namespace: "karpenter", Name: "karpenter"}, d); err != nil {
			return err
		}
		if d.Status.AvailableReplicas != 2 {
			return fmt.Errorf("%d of 2 replicas available", d.Status.AvailableReplicas)
		}
		return nil
	})
	pods := &corev1.PodList{}
	if err := kube.List(ctx, pods, client.InNamespace("karpenter"), client.MatchingLabels{"app.kubernetes.io/instance": "karpenter"}); err != nil {
		t.Fatal(err)
	}
	nodes := map[string]bool{}
	for _, p := range pods.Items {
		nodes[p.Spec.NodeName] = true
		if p.Annotations["example.com/owner"] != "platform" || p.Spec.ServiceAccountName != "karpenter" {
			t.Errorf("pod %s: annotations %v, service account %s", p.Name, p.Annotations, p.Spec.ServiceAccountName)
		}
		checkKarpenterPodValues(t, p)
	}
	if len(pods.Items) != 2 || len(nodes) != 2 {
		t.Errorf("%d pods on %d nodes, want 2 on 2 (the anti-affinity term names the controller's pods)", len(pods.Items), len(nodes))
	}
	sa := &corev1.ServiceAccount{}
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "karpenter", Name: "karpenter"}, sa); err != nil || sa.Annotations["eks.amazonaws.com/role-arn"] == "" {
		t.Errorf("service account %v, %v", sa.Annotations, err)
	}
	monitor := &unstructured.Unstructured{}
	monitor.SetAPIVersion("monitoring.coreos.com/v1")
	monitor.SetKind("ServiceMonitor")
	if err := kube.Get(ctx, client.ObjectKey{Namespace: "karpenter", Name: "karpenter"}, monitor); err != nil {
		t.Errorf("service monitor: %v", err)
	}
	ns := &corev1.Namespace{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "karpenter"}, ns); err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := kube.Get(ctx, client.ObjectKey{Name: "karpenter"}, role); err != nil {
		t.Fatal(err)
	}
	if last := role.Rules[len(role.Rules)-1]; fmt.Sprint(last.APIGroups, last.Resources, last.Verbs) != "[coordination.k8s.io] [leases] [get list]" {
		t.Errorf("additionalClusterRoleRules: the ClusterRole's last rule is %v", last)
	}

	// Someone bound to the built-in admin role keeps managing NodePools, NodeClaims
	// and EC2NodeClasses: the chart's ClusterRole is aggregated into admin.
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice-admin"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "admin"},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: "alice"}}}
	if err := kube.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	for _, attrs := range []authorizationv1.ResourceAttributes{
		{Verb: "create", Group: "karpenter.sh", Resource: "nodepools"},
		{Verb: "delete", Group: "karpenter.sh", Resource: "nodeclaims"},
		{Verb: "patch", Group: "karpenter.k8s.aws", Resource: "ec2nodeclasses"},
	} {
		testenv.Eventually(t, 30*time.Second, "admin may "+attrs.Verb+" "+attrs.Resource, func() error {
			review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: "alice", ResourceAttributes: &attrs}}
			if err := kube.Create(ctx, review); err != nil {
				return err
			}
			if !review.Status.Allowed {
				return fmt.Errorf("denied: %s", review.Status.Reason)
			}
			return nil
		})
	}
}

// checkKarpenterPodValues checks that what testdata/karpenter-v1-values.yaml sets
// reached the running controller pod.
func checkKarpenterPodValues(t *testing.T, p corev1.Pod) {
	t.Helper()
	spec := p.Spec
	if len(spec.ImagePullSecrets) != 1 || spec.ImagePullSecrets[0].Name != "registry-credentials" {
		t.Errorf("pod %s: imagePullSecrets %v", p.Name, spec.ImagePullSecrets)
	}
	if spec.DNSConfig == nil || len(spec.DNSConfig.Options) != 1 || spec.SchedulerName != "default-scheduler" {
		t.Errorf("pod %s: dnsConfig %v, schedulerName %q", p.Name, spec.DNSConfig, spec.SchedulerName)
	}
	if len(spec.InitContainers) != 1 || spec.InitContainers[0].Name != "wait-for-proxy" {
		t.Errorf("pod %s: initContainers %v", p.Name, spec.InitContainers)
	}
	if len(spec.Containers) != 2 {
		t.Fatalf("pod %s has %d containers, want the controller and the sidecar", p.Name, len(spec.Containers))
	}
	controller, sidecar := spec.Containers[0], spec.Containers[1]
	if controller.Name != "controller" || controller.ImagePullPolicy != corev1.PullAlways {
		t.Errorf("pod %s: container %s pulls %s", p.Name, controller.Name, controller.ImagePullPolicy)
	}
	sc := controller.SecurityContext
	if sc == nil || sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Errorf("pod %s: controller securityContext %v", p.Name, sc)
	}
	env := map[string]string{}
	for _, e := range controller.Env {
		env[e.Name] = e.Value
	}
	for k, want := range map[string]string{"VM_MEMORY_OVERHEAD_PERCENT": "0.075", "RESERVED_ENIS": "0", "LOG_OUTPUT_PATHS": "stdout", "LOG_ERROR_OUTPUT_PATHS": "stderr", "AWS_REGION": "eu-west-1"} {
		if env[k] != want {
			t.Errorf("pod %s: env %s=%q, want %q", p.Name, k, env[k], want)
		}
	}
	if sidecar.Name != "log-shipper" || len(sidecar.VolumeMounts) != 1 || sidecar.VolumeMounts[0].Name != "aws-iam-token" {
		t.Errorf("pod %s: sidecar %s mounts %v, want extraVolumeMounts too", p.Name, sidecar.Name, sidecar.VolumeMounts)
	}
}

// serviceMonitorCRD stands in for prometheus-operator's CRD: enough for the API server
// to accept the chart's ServiceMonitor.
func serviceMonitorCRD() *apiextensionsv1.CustomResourceDefinition {
	preserve := true
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "servicemonitors.monitoring.coreos.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "monitoring.coreos.com", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "servicemonitors", Singular: "servicemonitor", Kind: "ServiceMonitor", ListKind: "ServiceMonitorList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object", XPreserveUnknownFields: &preserve}}}},
		},
	}
}
