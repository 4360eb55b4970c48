// Package simulate runs the scheduling engine on manifests read from files: the logic
// behind `dovetail simulate`. Reading, expansion of workloads into pods, and output
// formatting live here; the engine itself stays in controller/scheduling.
package simulate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	autoscalingv1 "github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/autoscaling/v1beta1"
	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/apis/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/commitment"
	"github.com/dovetail-sh/dovetail/controller/operator/settings"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/templates/crds"
)

// Inputs are the objects read from the files.
type Inputs struct {
	Pods          []*corev1.Pod
	DaemonSetPods []*corev1.Pod
	// DaemonSets are the objects DaemonSetPods came from: consolidation reserves
	// their pods on replacements the way the controller does, from the objects.
	DaemonSets  []*appsv1.DaemonSet
	NodePools   []*v1.NodePool
	NodeClasses []*awsv1.EC2NodeClass
	// NodeOverlays change the price and capacity of the types the pools plan with.
	NodeOverlays []*v1alpha1.NodeOverlay
	// Commitments are Reserved Instances and Savings Plans the plan is priced with.
	Commitments []*dovetailv1alpha1.Commitment
	// Buffers are CapacityBuffers: room kept for copies of a PodTemplate's or a
	// workload's pods. podTemplates and workloads are what they may name.
	Buffers []*v1beta1.CapacityBuffer
	// ProvisioningRequests are Kueue's requests for capacity for a gang, each
	// planned as a unit from its PodTemplates.
	ProvisioningRequests []*autoscalingv1.ProvisioningRequest
	podTemplates         map[string]corev1.PodTemplateSpec
	workloads            map[string]workload
	Nodes                []*corev1.Node
	// NodeClaims and PDBs matter only to consolidation: plain simulate plans
	// pending pods, which neither changes.
	NodeClaims []*v1.NodeClaim
	PDBs       []*policyv1.PodDisruptionBudget
	// BoundPods are pods with spec.nodeName set: existing load on those nodes.
	BoundPods []*corev1.Pod
	// Claims, Volumes and StorageClasses decide the zones of pods with volumes, as
	// in the cluster.
	Claims         []corev1.PersistentVolumeClaim
	Volumes        []corev1.PersistentVolume
	StorageClasses []storagev1.StorageClass
	// CSINodes say how many volumes each CSI driver may attach to a node.
	CSINodes []storagev1.CSINode
	// DefaultSpread are the cluster's default topology spread constraints
	// (--scheduler-config); Services, ReplicaSets, StatefulSets and
	// ReplicationControllers are what each pod's selector for them is deduced from.
	DefaultSpread          []corev1.TopologySpreadConstraint
	Services               []corev1.Service
	ReplicaSets            []appsv1.ReplicaSet
	StatefulSets           []appsv1.StatefulSet
	ReplicationControllers []corev1.ReplicationController
	// Controllers are the Deployments in the input that run the Dovetail
	// controller: predictions take its settings from them.
	Controllers []ControllerDeployment
	// clusterWorkloads are the workloads read from a cluster (their metadata.uid is
	// set): their pods are the input's Pods, and none is made from the template.
	clusterWorkloads []string
	// Warnings are notes for the user: objects ignored, unknown fields dropped.
	Warnings []string
	// Unreadable says which kinds ReadLive was not allowed to list, and what the
	// prediction lacks for it (also among the Warnings).
	Unreadable []string
}

// ControllerDeployment is a Deployment of the Dovetail controller, with where in
// the input it was read and the container that runs the controller.
type ControllerDeployment struct {
	Where      string
	Deployment *appsv1.Deployment
	Container  *corev1.Container
}

// AllWarnings are the Warnings, with one for the workloads read from a cluster.
func (in *Inputs) AllWarnings() []string {
	warnings := slices.Clip(in.Warnings)
	if len(in.clusterWorkloads) > 0 {
		names := in.clusterWorkloads
		if len(names) > 3 {
			names = append(names[:3:3], fmt.Sprintf("%d more", len(in.clusterWorkloads)-3))
		}
		warnings = append(warnings, fmt.Sprintf("%s were read from a cluster (metadata.uid is set): their pods are the Pods in the input, and no replica is made from their templates; to plan one as a new workload, remove its metadata.uid", strings.Join(names, ", ")))
	}
	if n := in.podsWithClaims(); n > 0 && len(in.Claims)+len(in.Volumes)+len(in.StorageClasses) == 0 {
		warnings = append(warnings, fmt.Sprintf("%d pod(s) mount PersistentVolumeClaims, but the input holds no PersistentVolumeClaims, PersistentVolumes or StorageClasses: where their volumes let them run is not taken into account; add pvc,pv,storageclasses to the snapshot", n))
	}
	return warnings
}

// podsWithClaims counts the input's pods that mount a PersistentVolumeClaim.
func (in *Inputs) podsWithClaims() int {
	n := 0
	for _, p := range append(slices.Clip(in.Pods), in.BoundPods...) {
		if slices.ContainsFunc(p.Spec.Volumes, func(v corev1.Volume) bool { return v.PersistentVolumeClaim != nil }) {
			n++
		}
	}
	return n
}

// fromCluster says whether a workload was read from a cluster, noting it: the API
// server sets metadata.uid, and a manifest written by hand has none.
func (in *Inputs) fromCluster(name string, m metav1.ObjectMeta) bool {
	if m.UID == "" {
		return false
	}
	in.clusterWorkloads = append(in.clusterWorkloads, name)
	return true
}

// ignoredKinds carry no scheduling constraints; workload files commonly include them.
var ignoredKinds = map[string]bool{
	"Namespace": true, "ConfigMap": true, "Secret": true, "ServiceAccount": true,
	"Role": true, "RoleBinding": true,
	"ClusterRole": true, "ClusterRoleBinding": true, "HorizontalPodAutoscaler": true, "Ingress": true,
	"NetworkPolicy": true, "PriorityClass": true,
}

// Read decodes every document of a multi-document YAML (or JSON) stream. Errors name
// the source, the document and the object, and what to change.
func (in *Inputs) Read(r io.Reader, source string) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	for doc := 1; ; doc++ {
		raw, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: reading document %d, %w", source, doc, err)
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		if err := in.add(raw, fmt.Sprintf("%s (document %d)", source, doc), true); err != nil {
			return err
		}
	}
}

func stripComments(raw []byte) []byte {
	var out bytes.Buffer
	for _, line := range strings.Split(string(raw), "\n") {
		if t := strings.TrimSpace(line); t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		out.WriteString(line)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

// add decodes one object; a List (what `kubectl get -o yaml` prints) is read item
// by item, where a List's items may not be Lists themselves.
func (in *Inputs) add(raw []byte, where string, listAllowed bool) error {
	var meta metav1.TypeMeta
	if err := yaml.Unmarshal(raw, &meta); err != nil {
		return fmt.Errorf("%s: malformed YAML, %w", where, err)
	}
	if meta.Kind == "" {
		return fmt.Errorf("%s: no kind; every document needs apiVersion and kind", where)
	}
	if meta.Kind == "List" {
		if !listAllowed {
			return fmt.Errorf("%s: a List inside a List; put the inner List's items in the outer one", where)
		}
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := yaml.Unmarshal(raw, &list); err != nil {
			return fmt.Errorf("%s: %s List: items must be a list of objects, %w", where, meta.APIVersion, err)
		}
		for i, item := range list.Items {
			if err := in.add(item, fmt.Sprintf("%s items[%d]", where, i), false); err != nil {
				return err
			}
		}
		return nil
	}
	// Dovetail's own kinds are decoded strictly, as the CRDs validate them. Workloads
	// are Kubernetes' business: an unknown field there cannot change scheduling, so it
	// is reported and dropped, as `kubectl apply --validate=false` would.
	decode := func(obj any) error {
		strictErr := yaml.UnmarshalStrict(raw, obj)
		if strictErr == nil {
			if err := applyCRDDefaults(raw, meta, obj); err != nil {
				return fmt.Errorf("%s: %s %s: %w", where, meta.APIVersion, meta.Kind, err)
			}
			return nil
		}
		if strings.HasPrefix(meta.APIVersion, v1.Group) || strings.HasPrefix(meta.APIVersion, awsv1.Group) {
			return fmt.Errorf("%s: %s %s: %w", where, meta.APIVersion, meta.Kind, strictErr)
		}
		if err := yaml.Unmarshal(raw, obj); err != nil {
			return fmt.Errorf("%s: %s %s: %w", where, meta.APIVersion, meta.Kind, err)
		}
		in.Warnings = append(in.Warnings, fmt.Sprintf("%s: %s %s: %v; the field was ignored", where, meta.APIVersion, meta.Kind, strictErr))
		return nil
	}
	named := func(m metav1.ObjectMeta) string {
		if m.Namespace != "" {
			return fmt.Sprintf("%s %s/%s", meta.Kind, m.Namespace, m.Name)
		}
		return fmt.Sprintf("%s %s", meta.Kind, m.Name)
	}
	switch gvk := meta.APIVersion + "/" + meta.Kind; gvk {
	case "v1/Pod":
		p := &corev1.Pod{}
		if err := decode(p); err != nil {
			return err
		}
		defaultNamespace(&p.ObjectMeta)
		// A pod from a file has not been through the API server's defaulting.
		p.Spec = scheduling.WithRequestsFromLimits(p.Spec)
		if p.Spec.NodeName != "" {
			in.BoundPods = append(in.BoundPods, p)
		} else {
			in.Pods = append(in.Pods, p)
		}
	case "v1/PersistentVolumeClaim":
		pvc := corev1.PersistentVolumeClaim{}
		if err := decode(&pvc); err != nil {
			return err
		}
		defaultNamespace(&pvc.ObjectMeta)
		in.Claims = append(in.Claims, pvc)
	case "v1/PersistentVolume":
		pv := corev1.PersistentVolume{}
		if err := decode(&pv); err != nil {
			return err
		}
		in.Volumes = append(in.Volumes, pv)
	case "storage.k8s.io/v1/StorageClass":
		sc := storagev1.StorageClass{}
		if err := decode(&sc); err != nil {
			return err
		}
		in.StorageClasses = append(in.StorageClasses, sc)
	case "storage.k8s.io/v1/CSINode":
		csi := storagev1.CSINode{}
		if err := decode(&csi); err != nil {
			return err
		}
		in.CSINodes = append(in.CSINodes, csi)
	case "apps/v1/Deployment":
		d := &appsv1.Deployment{}
		if err := decode(d); err != nil {
			return err
		}
		if c, ok := settings.ControllerContainer(d); ok {
			// The controller's own pods run wherever they run (a snapshot lists
			// them); what it tells a prediction is its settings.
			in.Controllers = append(in.Controllers, ControllerDeployment{Where: where, Deployment: d, Container: c})
			return nil
		}
		in.recordWorkload("Deployment", d.ObjectMeta, d.Spec.Template, replicas(d.Spec.Replicas, 1))
		// A Deployment's pods belong to its ReplicaSet, whose selector is the
		// Deployment's and the pod-template-hash its pods all share: kube-scheduler
		// deduces their default spread selector from it.
		defaultNamespace(&d.ObjectMeta)
		if in.fromCluster(named(d.ObjectMeta), d.ObjectMeta) {
			// Its ReplicaSets are in the snapshot if its pods are.
			return nil
		}
		in.ReplicaSets = append(in.ReplicaSets, appsv1.ReplicaSet{ObjectMeta: metav1.ObjectMeta{Name: d.Name, Namespace: d.Namespace}, Spec: appsv1.ReplicaSetSpec{Selector: d.Spec.Selector}})
		return in.addReplicas(where, named(d.ObjectMeta), "spec.replicas", controllerRef("apps/v1", "ReplicaSet", d.ObjectMeta), d.ObjectMeta, d.Spec.Template, replicas(d.Spec.Replicas, 1))
	case "apps/v1/ReplicaSet":
		rs := &appsv1.ReplicaSet{}
		if err := decode(rs); err != nil {
			return err
		}
		in.recordWorkload("ReplicaSet", rs.ObjectMeta, rs.Spec.Template, replicas(rs.Spec.Replicas, 1))
		defaultNamespace(&rs.ObjectMeta)
		in.ReplicaSets = append(in.ReplicaSets, *rs)
		if in.fromCluster(named(rs.ObjectMeta), rs.ObjectMeta) {
			return nil
		}
		return in.addReplicas(where, named(rs.ObjectMeta), "spec.replicas", controllerRef("apps/v1", "ReplicaSet", rs.ObjectMeta), rs.ObjectMeta, rs.Spec.Template, replicas(rs.Spec.Replicas, 1))
	case "apps/v1/StatefulSet":
		ss := &appsv1.StatefulSet{}
		if err := decode(ss); err != nil {
			return err
		}
		in.recordWorkload("StatefulSet", ss.ObjectMeta, ss.Spec.Template, replicas(ss.Spec.Replicas, 1))
		defaultNamespace(&ss.ObjectMeta)
		in.StatefulSets = append(in.StatefulSets, *ss)
		if in.fromCluster(named(ss.ObjectMeta), ss.ObjectMeta) {
			return nil
		}
		return in.addReplicas(where, named(ss.ObjectMeta), "spec.replicas", controllerRef("apps/v1", "StatefulSet", ss.ObjectMeta), ss.ObjectMeta, ss.Spec.Template, replicas(ss.Spec.Replicas, 1))
	case "v1/ReplicationController":
		rc := &corev1.ReplicationController{}
		if err := decode(rc); err != nil {
			return err
		}
		defaultNamespace(&rc.ObjectMeta)
		in.ReplicationControllers = append(in.ReplicationControllers, *rc)
		if in.fromCluster(named(rc.ObjectMeta), rc.ObjectMeta) {
			return nil
		}
		if rc.Spec.Template == nil {
			return fmt.Errorf("%s: %s: spec.template is missing; a ReplicationController's pods are made from it", where, named(rc.ObjectMeta))
		}
		return in.addReplicas(where, named(rc.ObjectMeta), "spec.replicas", controllerRef("v1", "ReplicationController", rc.ObjectMeta), rc.ObjectMeta, *rc.Spec.Template, replicas(rc.Spec.Replicas, 1))
	case "v1/Service":
		svc := &corev1.Service{}
		if err := decode(svc); err != nil {
			return err
		}
		defaultNamespace(&svc.ObjectMeta)
		in.Services = append(in.Services, *svc)
	case "batch/v1/Job":
		j := &batchv1.Job{}
		if err := decode(j); err != nil {
			return err
		}
		if in.fromCluster(named(j.ObjectMeta), j.ObjectMeta) {
			return nil
		}
		n := replicas(j.Spec.Parallelism, 1)
		if j.Spec.Completions != nil && *j.Spec.Completions < n {
			n = *j.Spec.Completions
		}
		return in.addReplicas(where, named(j.ObjectMeta), "spec.parallelism", controllerRef("batch/v1", "Job", j.ObjectMeta), j.ObjectMeta, j.Spec.Template, n)
	case "v1/PodTemplate":
		pt := &corev1.PodTemplate{}
		if err := decode(pt); err != nil {
			return err
		}
		defaultNamespace(&pt.ObjectMeta)
		if in.podTemplates == nil {
			in.podTemplates = map[string]corev1.PodTemplateSpec{}
		}
		in.podTemplates[pt.Namespace+"/"+pt.Name] = pt.Template
	case v1beta1.SchemeGroupVersion.String() + "/CapacityBuffer":
		cb := &v1beta1.CapacityBuffer{}
		if err := decode(cb); err != nil {
			return err
		}
		defaultNamespace(&cb.ObjectMeta)
		in.Buffers = append(in.Buffers, cb)
	case autoscalingv1.SchemeGroupVersion.String() + "/ProvisioningRequest":
		pr := &autoscalingv1.ProvisioningRequest{}
		if err := decode(pr); err != nil {
			return err
		}
		defaultNamespace(&pr.ObjectMeta)
		in.ProvisioningRequests = append(in.ProvisioningRequests, pr)
	case "apps/v1/DaemonSet":
		ds := &appsv1.DaemonSet{}
		if err := decode(ds); err != nil {
			return err
		}
		defaultNamespace(&ds.ObjectMeta)
		in.DaemonSets = append(in.DaemonSets, ds)
		tmpl := ds.Spec.Template
		tmpl.Spec = scheduling.WithRequestsFromLimits(tmpl.Spec)
		in.DaemonSetPods = append(in.DaemonSetPods, expand(ds.ObjectMeta, nil, tmpl, 1)...)
	case policyv1.SchemeGroupVersion.String() + "/PodDisruptionBudget":
		pdb := &policyv1.PodDisruptionBudget{}
		if err := decode(pdb); err != nil {
			return err
		}
		defaultNamespace(&pdb.ObjectMeta)
		if _, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector); err != nil {
			return fmt.Errorf("%s: %s: spec.selector: %w", where, named(pdb.ObjectMeta), err)
		}
		in.PDBs = append(in.PDBs, pdb)
	case v1.SchemeGroupVersion.String() + "/NodeClaim":
		nc := &v1.NodeClaim{}
		if err := decode(nc); err != nil {
			return err
		}
		for _, existing := range in.NodeClaims {
			if existing.Name == nc.Name {
				return fmt.Errorf("%s: %s is defined twice; NodeClaim names must be unique", where, named(nc.ObjectMeta))
			}
		}
		in.NodeClaims = append(in.NodeClaims, nc)
	case "v1/Node":
		n := &corev1.Node{}
		if err := decode(n); err != nil {
			return err
		}
		if len(n.Status.Allocatable) == 0 {
			return fmt.Errorf("%s: %s has no status.allocatable; existing nodes need their allocatable resources", where, named(n.ObjectMeta))
		}
		in.Nodes = append(in.Nodes, n)
	case v1.SchemeGroupVersion.String() + "/NodePool":
		np := &v1.NodePool{}
		if err := decode(np); err != nil {
			return err
		}
		if _, err := scheduling.FromNodePoolRequirements(np.Spec.Template.Spec.Requirements); err != nil {
			return fmt.Errorf("%s: %s: spec.template.spec.requirements: %w", where, named(np.ObjectMeta), err)
		}
		for _, existing := range in.NodePools {
			if existing.Name == np.Name {
				return fmt.Errorf("%s: %s is defined twice; NodePool names must be unique", where, named(np.ObjectMeta))
			}
		}
		in.NodePools = append(in.NodePools, np)
	case v1alpha1.SchemeGroupVersion.String() + "/NodeOverlay":
		o := &v1alpha1.NodeOverlay{}
		if err := decode(o); err != nil {
			return err
		}
		for _, existing := range in.NodeOverlays {
			if existing.Name == o.Name {
				return fmt.Errorf("%s: %s is defined twice; NodeOverlay names must be unique", where, named(o.ObjectMeta))
			}
		}
		in.NodeOverlays = append(in.NodeOverlays, o)
	case dovetailv1alpha1.SchemeGroupVersion.String() + "/Commitment":
		c := &dovetailv1alpha1.Commitment{}
		if err := decode(c); err != nil {
			return err
		}
		if _, err := commitment.Parse(c); err != nil {
			return fmt.Errorf("%s: %s: %w", where, named(c.ObjectMeta), err)
		}
		for _, existing := range in.Commitments {
			if existing.Name == c.Name {
				return fmt.Errorf("%s: %s is defined twice; Commitment names must be unique", where, named(c.ObjectMeta))
			}
		}
		in.Commitments = append(in.Commitments, c)
	case awsv1.SchemeGroupVersion.String() + "/EC2NodeClass":
		nc := &awsv1.EC2NodeClass{}
		if err := decode(nc); err != nil {
			return err
		}
		in.NodeClasses = append(in.NodeClasses, nc)
	default:
		if meta.Kind == "PodDisruptionBudget" {
			in.Warnings = append(in.Warnings, fmt.Sprintf("%s: ignoring %s PodDisruptionBudget: only policy/v1 is read", where, meta.APIVersion))
			return nil
		}
		if ignoredKinds[meta.Kind] {
			in.Warnings = append(in.Warnings, fmt.Sprintf("%s: ignoring %s: it does not affect scheduling", where, meta.Kind))
			return nil
		}
		return fmt.Errorf("%s: unsupported kind %s %s; simulate reads Pods, Deployments, ReplicaSets, StatefulSets, ReplicationControllers, Jobs, Services, DaemonSets, Nodes, NodePools, NodeClaims, EC2NodeClasses, NodeOverlays, CapacityBuffers, ProvisioningRequests, Commitments, PodTemplates, PodDisruptionBudgets, PersistentVolumeClaims, PersistentVolumes, StorageClasses, CSINodes and Lists of them", where, meta.APIVersion, meta.Kind)
	}
	return nil
}

// crdDefaulter applies our CRDs' defaults; built once, on the first object of ours.
var crdDefaulter = sync.OnceValues(crds.NewDefaulter)

// applyCRDDefaults decodes raw again into obj with the defaults our CRD for its kind
// declares filled in, as the API server would have stored it: a v1.15 NodePool may
// leave consolidateAfter out and mean 0s. Kinds our CRDs do not define are left as
// decoded.
func applyCRDDefaults(raw []byte, meta metav1.TypeMeta, obj any) error {
	gvk := schema.FromAPIVersionAndKind(meta.APIVersion, meta.Kind)
	d, err := crdDefaulter()
	if err != nil {
		return fmt.Errorf("reading the embedded CRDs, %w", err)
	}
	u := map[string]any{}
	if err := yaml.Unmarshal(raw, &u); err != nil {
		return err
	}
	if !d.Default(gvk, u) {
		return nil
	}
	defaulted, err := json.Marshal(u)
	if err != nil {
		return err
	}
	// Through sigs.k8s.io/yaml, as the first decode was: it reads a YAML scalar as
	// the Go type of its field (name: true is the string "true").
	return yaml.Unmarshal(defaulted, obj)
}

func replicas(p *int32, def int32) int32 {
	if p == nil {
		return def
	}
	return *p
}

func defaultNamespace(m *metav1.ObjectMeta) {
	if m.Namespace == "" {
		m.Namespace = "default"
	}
}

// maxReplicas bounds one workload's replicas: far above any real Deployment, and
// low enough that a typo cannot make simulate allocate millions of pods.
const maxReplicas = 200_000

// addReplicas adds a workload's replicas as pending pods, refusing counts no
// cluster could run.
func (in *Inputs) addReplicas(where, name, field string, controller *metav1.OwnerReference, owner metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int32) error {
	if n < 0 || n > maxReplicas {
		return fmt.Errorf("%s: %s: %s is %d; simulate plans 0 to %d replicas of a workload", where, name, field, n, maxReplicas)
	}
	tmpl.Spec = scheduling.WithRequestsFromLimits(tmpl.Spec)
	in.Pods = append(in.Pods, expand(owner, controller, tmpl, n)...)
	return nil
}

// workload is what a CapacityBuffer's scalableRef may name.
type workload struct {
	template corev1.PodTemplateSpec
	replicas int32
}

func (in *Inputs) recordWorkload(kind string, meta metav1.ObjectMeta, tmpl corev1.PodTemplateSpec, n int32) {
	defaultNamespace(&meta)
	if in.workloads == nil {
		in.workloads = map[string]workload{}
	}
	in.workloads[kind+"/"+meta.Namespace+"/"+meta.Name] = workload{template: tmpl, replicas: n}
}

// expand turns a workload into its replicas. Replicas share the template's spec
// (nothing mutates it), which also lets the engine recognise them as one class.
func expand(owner metav1.ObjectMeta, controller *metav1.OwnerReference, tmpl corev1.PodTemplateSpec, n int32) []*corev1.Pod {
	defaultNamespace(&owner)
	out := make([]*corev1.Pod, 0, n)
	for i := int32(0); i < n; i++ {
		p := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: tmpl.Spec}
		p.Name = fmt.Sprintf("%s-%d", owner.Name, i)
		p.Namespace = owner.Namespace
		if controller != nil {
			p.OwnerReferences = []metav1.OwnerReference{*controller}
		}
		if p.Labels == nil {
			p.Labels = map[string]string{}
		}
		out = append(out, p)
	}
	return out
}

// controllerRef names the object that made a workload's pods, as their controller.
func controllerRef(apiVersion, kind string, owner metav1.ObjectMeta) *metav1.OwnerReference {
	yes := true
	return &metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.Name, UID: owner.UID, Controller: &yes}
}
