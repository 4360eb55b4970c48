// Package kwok is a cloud provider whose "instances" are Node objects that kwok keeps
// Ready: Create writes a Node with the labels and capacity of the chosen instance type,
// so provisioning, registration and termination run end to end on a local control
// plane with no cloud.
package kwok

import (
	"context"
	"fmt"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/classtypes"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

const (
	// NodeAnnotation marks Nodes kwok should manage; kwok runs with
	// --manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake.
	NodeAnnotation = "kwok.x-k8s.io/node"
	// ProviderIDPrefix starts every providerID this provider hands out.
	ProviderIDPrefix = "kwok://"
	// labelManaged marks Nodes this provider created, for List.
	labelManaged = "dovetail.sh/kwok"
)

// CloudProvider launches kwok Nodes from a catalog.
type CloudProvider struct {
	client   client.Client
	catalog  *catalog.File
	settings scheduling.AllocatableSettings
	// reservedENIs are the ENIs --reserved-enis keeps from pods.
	reservedENIs int
	// types are the catalog's for a claim of no EC2NodeClass.
	types []*scheduling.InstanceType

	mu sync.Mutex
	// byClass are the types each EC2NodeClass makes of the catalog, as of the
	// class's resourceVersion.
	byClass map[string]classTypes
}

type classTypes struct {
	resourceVersion string
	types           []*scheduling.InstanceType
}

// New builds the provider. settings shape allocatable as on EKS, and
// reservedENIs lower max pods as the AWS provider's --reserved-enis does.
func New(c client.Client, cat *catalog.File, settings scheduling.AllocatableSettings, reservedENIs int) *CloudProvider {
	return &CloudProvider{client: c, catalog: cat, settings: settings, reservedENIs: reservedENIs, types: cat.WithReservedENIs(reservedENIs).ForEngine(settings), byClass: map[string]classTypes{}}
}

func (p *CloudProvider) Name() string { return "kwok" }

// GetInstanceTypes are the types the pool's EC2NodeClass makes of the catalog, as
// the AWS provider offers them (its kubelet's maxPods and reservations, its
// cpuOptions...), so a kwok node holds what an EC2 one would and predictions of
// a kwok cluster are checked against the controller on the same terms.
func (p *CloudProvider) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	return p.typesOf(ctx, np.Spec.Template.Spec.NodeClassRef)
}

// typesOf are the types of a claim or pool of the class; the catalog's when it
// names none, or one that does not exist (kwok needs nothing of it to launch).
func (p *CloudProvider) typesOf(ctx context.Context, ref *v1.NodeClassReference) ([]*scheduling.InstanceType, error) {
	if ref == nil || ref.Kind != "EC2NodeClass" {
		return p.types, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return p.types, nil
		}
		return nil, fmt.Errorf("reading EC2NodeClass %s, %w", ref.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if cached, ok := p.byClass[class.Name]; ok && cached.resourceVersion == class.ResourceVersion {
		return cached.types, nil
	}
	types := classtypes.Of(p.catalog, class, p.reservedENIs, p.settings.VMMemoryOverheadPercent)
	p.byClass[class.Name] = classTypes{resourceVersion: class.ResourceVersion, types: types}
	return types, nil
}

func (p *CloudProvider) IsDrifted(context.Context, *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	return "", nil
}

// Create writes the Node for the claim. The Node carries the unregistered taint, as a
// real kubelet would, so the registration controller has the same work to do.
// Create is idempotent, as a cloud's launch tagged with the claim is: when the
// claim's Node already exists (a launch whose result was not recorded), it returns
// that Node's instance instead of launching another.
func (p *CloudProvider) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	types, err := p.typesOf(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	node := &corev1.Node{}
	err = p.client.Get(ctx, client.ObjectKey{Name: nc.Name}, node)
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("finding the kwok node of the claim, %w", err)
	}
	if apierrors.IsNotFound(err) {
		if node, err = p.createNode(ctx, nc, types); err != nil {
			return nil, err
		}
	}
	if node.DeletionTimestamp != nil {
		return nil, fmt.Errorf("kwok node %s of an earlier claim of the same name is still being deleted", node.Name)
	}
	it := instanceType(types, node.Labels[v1.LabelInstanceType])
	if it == nil {
		return nil, fmt.Errorf("kwok node %s has instance type %q, which the catalog does not have", node.Name, node.Labels[v1.LabelInstanceType])
	}
	if err := p.ensureStatus(ctx, node, it); err != nil {
		return nil, err
	}
	launched := nc.DeepCopy()
	launched.Status.ProviderID = node.Spec.ProviderID
	launched.Status.Capacity = it.Capacity.ToResourceList()
	launched.Status.Allocatable = it.Allocatable.ToResourceList()
	launched.Status.ImageID = "kwok"
	if launched.Labels == nil {
		launched.Labels = map[string]string{}
	}
	for _, k := range []string{v1.LabelInstanceType, v1.LabelTopologyZone, v1.LabelCapacityType, v1.LabelArch, v1.LabelOS} {
		launched.Labels[k] = node.Labels[k]
	}
	return launched, nil
}

// createNode writes a new Node for the claim, of the cheapest type it allows.
func (p *CloudProvider) createNode(ctx context.Context, nc *v1.NodeClaim, types []*scheduling.InstanceType) (*corev1.Node, error) {
	it, offering, err := cloudprovider.CheapestCompatible(nc, types)
	if err != nil {
		return nil, err
	}
	entry, _ := p.catalog.Find(it.Name)
	reqs, _ := cloudprovider.Requirements(nc)
	labels := map[string]string{}
	for k, v := range reqs.Labels() {
		labels[k] = v
	}
	for k, v := range entry.NodeLabels() {
		labels[k] = v
	}
	for k, v := range nc.Labels {
		labels[k] = v
	}
	labels[v1.LabelTopologyZone] = offering.Zone
	labels[v1.LabelCapacityType] = offering.CapacityType
	labels[v1.LabelInstanceType] = it.Name
	labels[v1.LabelHostname] = nc.Name
	labels[labelManaged] = "true"
	taints := append(append([]corev1.Taint{}, nc.Spec.Taints...), nc.Spec.StartupTaints...)
	taints = append(taints, v1.UnregisteredNoExecuteTaint)
	// The Node is created with its status, as a kubelet registers its Node: kwok
	// starts writing the node's status the moment it appears, and a stage that read
	// a Node without resources writes its defaults (cpu 1k, memory 1Ti) over any
	// patched in after.
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        nc.Name,
			Labels:      labels,
			Annotations: map[string]string{NodeAnnotation: "fake"},
		},
		Spec:   corev1.NodeSpec{ProviderID: ProviderIDPrefix + nc.Name, Taints: taints},
		Status: nodeStatus(it, labels),
	}
	if err := p.client.Create(ctx, node); err != nil {
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating kwok node, %w", err)
		}
		// Created by a launch this Get did not see yet: that one is the instance.
		if err := p.client.Get(ctx, client.ObjectKey{Name: nc.Name}, node); err != nil {
			return nil, fmt.Errorf("finding the kwok node of the claim, %w", err)
		}
	}
	return node, nil
}

// nodeStatus is what the instance's kubelet would register.
func nodeStatus(it *scheduling.InstanceType, labels map[string]string) corev1.NodeStatus {
	return corev1.NodeStatus{Capacity: it.Capacity.ToResourceList(), Allocatable: it.Allocatable.ToResourceList(),
		NodeInfo: corev1.NodeSystemInfo{Architecture: labels[v1.LabelArch], OperatingSystem: labels[v1.LabelOS], KubeletVersion: "v1.33.13"}}
}

// ensureStatus checks the Node holds its instance's resources and writes them when it
// does not: an API server that dropped the status on create, or a writer that put
// other figures there. A patch, not an update: kwok writes the node's conditions.
func (p *CloudProvider) ensureStatus(ctx context.Context, node *corev1.Node, it *scheduling.InstanceType) error {
	want := nodeStatus(it, node.Labels)
	if equality.Semantic.DeepEqual(node.Status.Capacity, want.Capacity) && equality.Semantic.DeepEqual(node.Status.Allocatable, want.Allocatable) {
		return nil
	}
	base := node.DeepCopy()
	node.Status.Capacity, node.Status.Allocatable = want.Capacity, want.Allocatable
	if node.Status.NodeInfo.KubeletVersion == "" {
		node.Status.NodeInfo = want.NodeInfo
	}
	if err := p.client.Status().Patch(ctx, node, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("writing kwok node capacity, %w", err)
	}
	return nil
}

func instanceType(types []*scheduling.InstanceType, name string) *scheduling.InstanceType {
	for _, it := range types {
		if it.Name == name {
			return it
		}
	}
	return nil
}

func (p *CloudProvider) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	name, ok := strings.CutPrefix(nc.Status.ProviderID, ProviderIDPrefix)
	if !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("providerID %q is not a kwok one", nc.Status.ProviderID))
	}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := p.client.Delete(ctx, node); err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewNodeClaimNotFoundError(err)
		}
		return fmt.Errorf("deleting kwok node, %w", err)
	}
	return nil
}

// Reboot stands in for an instance reboot as Karpenter's kwok provider does: the
// node reports a new boot ID, kwok-<operationID>.
func (p *CloudProvider) Reboot(ctx context.Context, nc *v1.NodeClaim, operationID string) error {
	name, ok := strings.CutPrefix(nc.Status.ProviderID, ProviderIDPrefix)
	if !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("providerID %q is not a kwok one", nc.Status.ProviderID))
	}
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return cloudprovider.NewNodeClaimNotFoundError(err)
		}
		return fmt.Errorf("rebooting kwok node, %w", err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Status.NodeInfo.BootID = "kwok-" + operationID
	if err := p.client.Status().Patch(ctx, node, patch); err != nil {
		return fmt.Errorf("rebooting kwok node, %w", err)
	}
	return nil
}

func (p *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	name, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("providerID %q is not a kwok one", providerID))
	}
	node := &corev1.Node{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, cloudprovider.NewNodeClaimNotFoundError(err)
		}
		return nil, err
	}
	return toNodeClaim(node), nil
}

func (p *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	nodes := &corev1.NodeList{}
	if err := p.client.List(ctx, nodes, client.MatchingLabels{labelManaged: "true"}); err != nil {
		return nil, err
	}
	out := make([]*v1.NodeClaim, 0, len(nodes.Items))
	for i := range nodes.Items {
		out = append(out, toNodeClaim(&nodes.Items[i]))
	}
	return out, nil
}

func toNodeClaim(node *corev1.Node) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: node.Name, Labels: node.Labels, CreationTimestamp: node.CreationTimestamp}}
	nc.Status.ProviderID = node.Spec.ProviderID
	nc.Status.Capacity = node.Status.Capacity
	nc.Status.Allocatable = node.Status.Allocatable
	return nc
}
