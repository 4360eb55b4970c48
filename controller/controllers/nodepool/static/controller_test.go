package static

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	dovetailv1alpha1 "github.com/dovetail-sh/dovetail/controller/apis/dovetail/v1alpha1"
	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/fake"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// launcher creates the claims it is asked to, as the provisioner would, and keeps
// the plans.
type launcher struct {
	kube  client.Client
	plans []*scheduling.NodeClaimPlan
}

func (l *launcher) Launch(ctx context.Context, np *v1.NodePool, plan *scheduling.NodeClaimPlan, _ string) (*v1.NodeClaim, error) {
	l.plans = append(l.plans, plan)
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-new-%d", np.Name, len(l.plans)), Labels: map[string]string{v1.LabelNodePool: np.Name},
		Annotations: map[string]string{dovetailv1alpha1.PlannedPriceAnnotationKey: strconv.FormatFloat(plan.Offering.Price, 'f', 6, 64)}},
		Spec: v1.NodeClaimSpec{Requirements: plan.Requirements.ToNodeSelectorRequirements()}}
	return nc, l.kube.Create(ctx, nc)
}

type fixture struct {
	kube   client.Client
	launch *launcher
	ctrl   *Controller
}

func staticPool(replicas int64, limit string) *v1.NodePool {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "static"}}
	np.Spec.Replicas = &replicas
	np.Spec.Template.Labels = map[string]string{"role": "ingress"}
	if limit != "" {
		np.Spec.Limits = v1.Limits{v1.ResourceNodes: resource.MustParse(limit)}
	}
	np.Status.Conditions = []metav1.Condition{{Type: v1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready", LastTransitionTime: metav1.Now()}}
	return np
}

func newFixture(t *testing.T, objs ...client.Object) *fixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC))
	kube := fakeclient.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(&v1.NodePool{}, &v1.NodeClaim{}).
		WithIndex(&corev1.Pod{}, "spec.nodeName", func(o client.Object) []string { return []string{o.(*corev1.Pod).Spec.NodeName} }).Build()
	cheap := fake.InstanceType("cheap.large", "2", "8Gi", "test-zone-a")
	dear := fake.InstanceType("dear.large", "2", "8Gi", "test-zone-a")
	dear.Offerings[0].Price = 0.5
	dear.Refresh()
	l := &launcher{kube: kube}
	return &fixture{kube: kube, launch: l, ctrl: NewController(kube, kube, fake.New(clk, dear, cheap), l, clk)}
}

func (f *fixture) reconcile(t *testing.T) {
	t.Helper()
	np := &v1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "static"}, np); err != nil {
		t.Fatal(err)
	}
	if _, err := f.ctrl.Reconcile(context.Background(), np); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) claims(t *testing.T) []string {
	t.Helper()
	var list v1.NodeClaimList
	if err := f.kube.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, nc := range list.Items {
		if nc.DeletionTimestamp == nil {
			out = append(out, nc.Name)
		}
	}
	sort.Strings(out)
	return out
}

// TestStaticNodePoolScalesUpWithinItsLimit: replicas 3 launches three claims from
// the template, the cheapest type first; limits.nodes 2 stops at two.
func TestStaticNodePoolScalesUpWithinItsLimit(t *testing.T) {
	f := newFixture(t, staticPool(3, ""))
	f.reconcile(t)
	if got := f.claims(t); len(got) != 3 {
		t.Fatalf("claims %v; want 3", got)
	}
	plan := f.launch.plans[0]
	if plan.InstanceType.Name != "cheap.large" || plan.InstanceTypeOptions[1].Name != "dear.large" || len(plan.Pods) != 0 || !plan.Requirements.Get("role").Has("ingress") {
		t.Errorf("plan %s with options %v, %d pods, requirements %v; want the cheapest first, no pods, the template's labels", plan.InstanceType.Name, plan.InstanceTypeOptions, len(plan.Pods), plan.Requirements)
	}
	f.reconcile(t)
	if got := f.claims(t); len(got) != 3 {
		t.Errorf("a second pass at the count: claims %v", got)
	}

	limited := newFixture(t, staticPool(3, "2"))
	limited.reconcile(t)
	if got := limited.claims(t); len(got) != 2 {
		t.Errorf("replicas 3 under limits.nodes 2: claims %v; want 2", got)
	}
}

// TestStaticNodePoolScalesUpWithinItsSpendLimit: replicas 3 of a $0.10/h node
// under dovetail.sh/usd-per-hour 0.25 stops at two, counting a claim already there
// (at its planned price, or its offering's) and one still being deleted.
func TestStaticNodePoolScalesUpWithinItsSpendLimit(t *testing.T) {
	np := staticPool(3, "")
	np.Spec.Limits = v1.Limits{scheduling.ResourceSpendPerHour: resource.MustParse("0.25")}
	f := newFixture(t, np)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 2 {
		t.Fatalf("replicas 3 of $0.10/h under a $0.25/h limit: claims %v; want 2", got)
	}
	f.reconcile(t)
	if got := f.claims(t); len(got) != 2 {
		t.Errorf("a second pass at the spend limit: claims %v; want 2", got)
	}

	// The pool's one node runs the dear type ($0.50/h) and is going: its instance
	// may still run, so a $0.65/h limit leaves room for one $0.10/h node.
	np = staticPool(3, "")
	np.Spec.Limits = v1.Limits{scheduling.ResourceSpendPerHour: resource.MustParse("0.65")}
	now := metav1.Now()
	going := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "going", DeletionTimestamp: &now, Finalizers: []string{v1.TerminationFinalizer},
		Labels: map[string]string{v1.LabelNodePool: "static", v1.LabelInstanceType: "dear.large", v1.LabelTopologyZone: "test-zone-a", v1.LabelCapacityType: v1.CapacityTypeOnDemand}}}
	f = newFixture(t, np, going)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 1 {
		t.Errorf("$0.50/h of a $0.65/h limit spent on a claim being deleted: new claims %v; want 1", got)
	}
}

// laggingCache is an informer cache that has not yet seen any NodeClaim: what
// the controller reads through it right after its own launches.
type laggingCache struct{ client.Client }

func (c laggingCache) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if _, ok := list.(*v1.NodeClaimList); ok {
		return nil
	}
	return c.Client.List(ctx, list, opts...)
}

// TestStaticNodePoolCountsClaimsTheCacheHasNotSeen: a second reconcile that
// runs before the cache shows the first one's claims launches none, and a scale
// down is not repeated either.
func TestStaticNodePoolCountsClaimsTheCacheHasNotSeen(t *testing.T) {
	f := newFixture(t, staticPool(5, "2"))
	f.ctrl.kube = laggingCache{f.kube}
	f.reconcile(t)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 2 {
		t.Fatalf("two passes at replicas 5 under limits.nodes 2, the cache behind: claims %v; want 2", got)
	}
	np := &v1.NodePool{}
	if err := f.kube.Get(context.Background(), client.ObjectKey{Name: "static"}, np); err != nil {
		t.Fatal(err)
	}
	one := int64(1)
	np.Spec.Replicas = &one
	if err := f.kube.Update(context.Background(), np); err != nil {
		t.Fatal(err)
	}
	f.reconcile(t)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 1 {
		t.Errorf("two passes at replicas 1, the cache behind: claims %v; want 1", got)
	}
}

// TestStaticNodePoolScalesDownCheapestToLoseFirst: from five claims to two, it
// deletes the one not launched yet, then the empty one (DaemonSet pods only), then
// the one whose pods cost least to evict; the node with a do-not-disrupt pod is
// the last it would take, and a claim being disrupted is not taken.
func TestStaticNodePoolScalesDownCheapestToLoseFirst(t *testing.T) {
	claim := func(name string, launched bool) *v1.NodeClaim {
		nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "static"}}}
		if launched {
			nc.Status.ProviderID, nc.Status.NodeName = "fake:///"+name, name+"-node"
		}
		return nc
	}
	node := func(name string, tainted bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name + "-node"}}
		if tainted {
			n.Spec.Taints = []corev1.Taint{v1.DisruptedNoScheduleTaint}
		}
		return n
	}
	controller := true
	pod := func(name, node string, owner string, annotations map[string]string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", UID: types.UID(name), Annotations: annotations,
			OwnerReferences: []metav1.OwnerReference{{Kind: owner, Name: "o", Controller: &controller}}},
			Spec: corev1.PodSpec{NodeName: node + "-node"}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	}
	f := newFixture(t, staticPool(2, ""),
		claim("pending", false),
		claim("empty", true), node("empty", false), pod("ds", "empty", "DaemonSet", nil),
		claim("light", true), node("light", false), pod("a", "light", "ReplicaSet", nil),
		claim("heavy", true), node("heavy", false), pod("b", "heavy", "ReplicaSet", nil), pod("c", "heavy", "ReplicaSet", nil),
		claim("guarded", true), node("guarded", false), pod("d", "guarded", "ReplicaSet", map[string]string{v1.DoNotDisruptAnnotationKey: "true"}),
		claim("drifting", true), node("drifting", true),
	)
	f.reconcile(t)
	// Six claims, one being disrupted: five active, three go.
	if got, want := f.claims(t), []string{"drifting", "guarded", "heavy"}; !slices.Equal(got, want) {
		t.Fatalf("claims left %v; want %v", got, want)
	}
	f.reconcile(t)
	if got := f.claims(t); len(got) != 3 || len(f.launch.plans) != 0 {
		t.Errorf("after scaling down: claims %v, %d launched; the disrupted claim still holds its place", got, len(f.launch.plans))
	}
}

// A pool without replicas, or not Ready, is none of this controller's business.
func TestStaticNodePoolIgnoresOtherPools(t *testing.T) {
	np := staticPool(2, "")
	np.Spec.Replicas = nil
	f := newFixture(t, np)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 0 {
		t.Errorf("a dynamic pool got claims %v", got)
	}
	notReady := staticPool(2, "")
	notReady.Status.Conditions[0].Status = metav1.ConditionFalse
	f = newFixture(t, notReady)
	f.reconcile(t)
	if got := f.claims(t); len(got) != 0 {
		t.Errorf("a pool that is not Ready got claims %v", got)
	}
}
