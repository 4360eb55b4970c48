// Package state is the one view of the cluster the controller's loops share:
// provisioning, disruption and interruption read it instead of each listing the
// cluster their own way. It is fed by the manager's informer cache, plus what this
// process wrote that the cache may not show yet, and holds nothing that matters only
// in memory: what a restart must know (an in-flight disruption) is written to the
// API (see Disruption) and read back from it on every pass, so a new process or a
// new leader picks up where the last one stopped.
package state

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	storagev1 "k8s.io/api/storage/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling/defaultspread"
)

// Cluster reads the cluster for every loop.
type Cluster struct {
	kube      client.Client
	informers cache.Informers
	clock     clock.Clock
	created   createdClaims
	// defaultSpread are the cluster's default topology spread constraints
	// (--scheduler-config): with some, every read also lists what pods' selectors
	// are deduced from.
	defaultSpread []corev1.TopologySpreadConstraint
}

// NewCluster reads through kube, which should be the manager's cached client.
func NewCluster(kube client.Client, clk clock.Clock) *Cluster {
	return &Cluster{kube: kube, clock: clk}
}

// WithInformers lets read-only views take pods straight from the informer's
// store: even an uncopied List copies every Pod struct into a new slice, about a
// kilobyte each, and with tens of thousands of pods and several loops reading at
// once those copies were the largest part of the controller's live memory.
func (c *Cluster) WithInformers(informers cache.Informers) *Cluster {
	c.informers = informers
	return c
}

// WithDefaultSpread gives every view's pods the cluster's default topology spread
// constraints, as kube-scheduler places them (see defaultspread): provisioning and
// consolidation then plan the pods kube-scheduler will place.
func (c *Cluster) WithDefaultSpread(constraints []corev1.TopologySpreadConstraint) *Cluster {
	c.defaultSpread = constraints
	return c
}

// View is the cluster at one moment, with the indexes every loop needs.
type View struct {
	// Pods point into the informer's store when read ReadOnly: never write to
	// one.
	Pods       []*corev1.Pod
	Nodes      []corev1.Node
	Claims     []v1.NodeClaim
	Pools      []v1.NodePool
	PDBs       []policyv1.PodDisruptionBudget
	DaemonSets []appsv1.DaemonSet
	// PVCs, PVs and StorageClasses say where pods' volumes let them run.
	PVCs           []corev1.PersistentVolumeClaim
	PVs            []corev1.PersistentVolume
	StorageClasses []storagev1.StorageClass
	// CSINodes say how many volumes each CSI driver may attach to a node.
	CSINodes []storagev1.CSINode
	// VolumesUnknown says the view has none of those (manifests read from files
	// without them): pods' volumes are then not evaluated, rather than every pod
	// with a claim refused for a claim nobody listed.
	VolumesUnknown bool
	podsOnNode     map[string][]*corev1.Pod
	nodeOfID       map[string]*corev1.Node
	claimOfNode    map[string]*v1.NodeClaim
}

// Copies says which of a View's objects may be written to.
type Copies int

const (
	// ReadOnly lists the cache without deep copies, for loops that run often
	// (provisioning reads every few hundred milliseconds in a burst, disruption
	// every pass, and copies of every pod and claim were most of the controller's
	// memory): pods point into the store, and the other objects share their maps
	// and slices with it. A loop that writes one changes a DeepCopy.
	ReadOnly Copies = iota
	// Writable copies every object, for loops that patch what they read.
	Writable
)

// Read lists the cluster once. Claims this process created count from the moment
// they were created, even before the cache lists them.
func (c *Cluster) Read(ctx context.Context, copies Copies) (*View, error) {
	var opts []client.ListOption
	if copies != Writable {
		opts = append(opts, client.UnsafeDisableDeepCopy)
	}
	var (
		pods   corev1.PodList
		nodes  corev1.NodeList
		claims v1.NodeClaimList
		pools  v1.NodePoolList
		pdbs   policyv1.PodDisruptionBudgetList
		ds     appsv1.DaemonSetList
		pvcs   corev1.PersistentVolumeClaimList
		pvs    corev1.PersistentVolumeList
		scs    storagev1.StorageClassList
		csis   storagev1.CSINodeList
	)
	podList := client.ObjectList(&pods)
	if copies != Writable && c.informers != nil {
		podList = nil
	}
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"pods", podList}, {"nodes", &nodes}, {"nodeclaims", &claims}, {"nodepools", &pools}, {"pod disruption budgets", &pdbs}, {"daemonsets", &ds},
		{"persistentvolumeclaims", &pvcs}, {"persistentvolumes", &pvs}, {"storageclasses", &scs}, {"csinodes", &csis}} {
		if l.list == nil {
			continue
		}
		if err := c.kube.List(ctx, l.list, opts...); err != nil {
			return nil, fmt.Errorf("listing %s, %w", l.what, err)
		}
	}
	podPtrs := pointers(pods.Items)
	if podList == nil {
		var err error
		if podPtrs, err = c.storedPods(ctx); err != nil {
			return nil, fmt.Errorf("listing pods, %w", err)
		}
	}
	v := &View{Pods: podPtrs, Nodes: nodes.Items, Claims: c.created.merge(claims.Items, c.clock.Now()), Pools: pools.Items, PDBs: pdbs.Items, DaemonSets: ds.Items}
	v.PVCs, v.PVs, v.StorageClasses, v.CSINodes = pvcs.Items, pvs.Items, scs.Items, csis.Items
	if len(c.defaultSpread) > 0 {
		w, err := c.workloads(ctx, opts)
		if err != nil {
			return nil, err
		}
		v.applyDefaultSpread(c.defaultSpread, w)
	}
	v.index()
	return v, nil
}

// workloads lists what kube-scheduler deduces a pod's default spread selector
// from. Only a cluster with default constraints watches them: a large cluster has
// many ReplicaSets.
func (c *Cluster) workloads(ctx context.Context, opts []client.ListOption) (defaultspread.Workloads, error) {
	var (
		services corev1.ServiceList
		rcs      corev1.ReplicationControllerList
		rss      appsv1.ReplicaSetList
		sss      appsv1.StatefulSetList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{{"services", &services}, {"replicationcontrollers", &rcs}, {"replicasets", &rss}, {"statefulsets", &sss}} {
		if err := c.kube.List(ctx, l.list, opts...); err != nil {
			return defaultspread.Workloads{}, fmt.Errorf("listing %s for the default topology spread, %w", l.what, err)
		}
	}
	return defaultspread.Workloads{Services: services.Items, ReplicationControllers: rcs.Items, ReplicaSets: rss.Items, StatefulSets: sss.Items}, nil
}

// ApplyDefaultSpread replaces each pod that takes the default constraints by a
// copy that carries them; the pods read are not written to.
func (v *View) ApplyDefaultSpread(constraints []corev1.TopologySpreadConstraint, w defaultspread.Workloads) {
	if v.applyDefaultSpread(constraints, w) {
		v.index()
	}
}

// applyDefaultSpread is ApplyDefaultSpread before the view is indexed; it reports
// whether any pod may have changed.
func (v *View) applyDefaultSpread(constraints []corev1.TopologySpreadConstraint, w defaultspread.Workloads) bool {
	in := defaultspread.NewInjector(constraints, w)
	if !in.Applies() {
		return false
	}
	for i, p := range v.Pods {
		v.Pods[i] = in.Pod(p)
	}
	return true
}

// storedPods are the pods in the informer's store, uncopied.
func (c *Cluster) storedPods(ctx context.Context) ([]*corev1.Pod, error) {
	informer, err := c.informers.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	store, ok := informer.(toolscache.SharedIndexInformer)
	if !ok {
		return nil, fmt.Errorf("the pod informer is a %T, not a shared index informer", informer)
	}
	if !store.HasSynced() {
		// An empty store would read as a cluster without pods.
		return nil, fmt.Errorf("the pod cache has not synced yet")
	}
	items := store.GetIndexer().List()
	out := make([]*corev1.Pod, 0, len(items))
	for _, item := range items {
		if pod, ok := item.(*corev1.Pod); ok {
			out = append(out, pod)
		}
	}
	return out, nil
}

func pointers(pods []corev1.Pod) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i := range pods {
		out[i] = &pods[i]
	}
	return out
}

// NewView indexes objects read some other way than from the cache: a snapshot
// from files, or a generated cluster.
func NewView(pods []corev1.Pod, nodes []corev1.Node, claims []v1.NodeClaim, pools []v1.NodePool, pdbs []policyv1.PodDisruptionBudget, ds []appsv1.DaemonSet) *View {
	v := &View{Pods: pointers(pods), Nodes: nodes, Claims: claims, Pools: pools, PDBs: pdbs, DaemonSets: ds}
	v.index()
	return v
}

// AddClaims adds claims to the view, as the cache lists claims just created: a
// prediction planning in rounds puts each round's claims in flight for the next.
func (v *View) AddClaims(claims ...v1.NodeClaim) {
	v.Claims = append(v.Claims, claims...)
	v.index()
}

// ClaimCreated records a claim this process just created, so that reads before the
// cache lists it still count it (see createdClaims).
func (c *Cluster) ClaimCreated(nc *v1.NodeClaim) { c.created.add(nc.DeepCopy(), c.clock.Now()) }

func (v *View) index() {
	v.podsOnNode = map[string][]*corev1.Pod{}
	for _, p := range v.Pods {
		if p.Spec.NodeName != "" {
			v.podsOnNode[p.Spec.NodeName] = append(v.podsOnNode[p.Spec.NodeName], p)
		}
	}
	v.nodeOfID = map[string]*corev1.Node{}
	for i := range v.Nodes {
		if id := v.Nodes[i].Spec.ProviderID; id != "" {
			v.nodeOfID[id] = &v.Nodes[i]
		}
	}
	v.claimOfNode = map[string]*v1.NodeClaim{}
	for i := range v.Claims {
		if n := v.NodeOf(&v.Claims[i]); n != nil {
			v.claimOfNode[n.Name] = &v.Claims[i]
		}
	}
}

// PodsOn are the pods bound to the node, finished ones included.
func (v *View) PodsOn(node string) []*corev1.Pod { return v.podsOnNode[node] }

// NodeOf is the claim's registered Node, or nil.
func (v *View) NodeOf(nc *v1.NodeClaim) *corev1.Node {
	if nc.Status.ProviderID == "" {
		return nil
	}
	return v.nodeOfID[nc.Status.ProviderID]
}

// ClaimOf is the NodeClaim a Node was launched for, or nil for nodes no pool owns.
func (v *View) ClaimOf(node string) *v1.NodeClaim { return v.claimOfNode[node] }

// ClaimsOfInstances are the claims launched as any of the cloud instance IDs (the
// last element of the provider ID, as EC2's i-0123 in aws:///us-west-2a/i-0123).
func (v *View) ClaimsOfInstances(ids ...string) []*v1.NodeClaim {
	wanted := map[string]bool{}
	for _, id := range ids {
		wanted[id] = true
	}
	var out []*v1.NodeClaim
	for i := range v.Claims {
		pid := v.Claims[i].Status.ProviderID
		if pid != "" && wanted[pid[strings.LastIndex(pid, "/")+1:]] {
			out = append(out, &v.Claims[i])
		}
	}
	return out
}

// createdClaimsTTL bounds how long a created claim the cache has not shown counts as
// in flight: the cache normally catches up in milliseconds, and a claim deleted
// before it did never shows up at all.
const createdClaimsTTL = 30 * time.Second

// createdClaims remembers the claims this process created until its cache lists
// them. A solve right after a launch (a batch's close follows its mid-batch launch
// by milliseconds) reads a cache that may not have the new claims yet: without them
// their nominations look void and the same pods are planned onto a second set of
// nodes, which end up empty.
type createdClaims struct {
	mu     sync.Mutex
	claims map[string]createdClaim
}

type createdClaim struct {
	claim   *v1.NodeClaim
	created time.Time
}

func (u *createdClaims) add(nc *v1.NodeClaim, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.claims == nil {
		u.claims = map[string]createdClaim{}
	}
	u.claims[nc.Name] = createdClaim{claim: nc, created: now}
}

// merge returns the listed claims plus the created ones the list does not have yet,
// and forgets those the list has and those past the TTL.
func (u *createdClaims) merge(listed []v1.NodeClaim, now time.Time) []v1.NodeClaim {
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.claims) == 0 {
		return listed
	}
	for i := range listed {
		delete(u.claims, listed[i].Name)
	}
	out := listed
	for name, c := range u.claims {
		if now.Sub(c.created) > createdClaimsTTL {
			delete(u.claims, name)
			continue
		}
		out = append(out, *c.claim.DeepCopy())
	}
	return out
}
