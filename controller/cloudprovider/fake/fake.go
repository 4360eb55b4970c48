// Package fake is an in-memory cloud provider for controller unit tests: it launches
// "instances" from a list of instance types, remembers them, counts every call, and
// can be told to fail launches or to lose instances, as a real cloud does.
package fake

import (
	"context"
	"fmt"
	"sort"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// ProviderIDPrefix starts every providerID the fake hands out.
const ProviderIDPrefix = "fake:///"

// CloudProvider implements cloudprovider.CloudProvider in memory. Create is not
// idempotent: each call launches a new instance, so a test sees double launches.
type CloudProvider struct {
	clock clock.Clock

	mu sync.Mutex
	// Types are what GetInstanceTypes returns and Create picks the cheapest from.
	Types []*scheduling.InstanceType
	// CreateErr, while set, is what Create returns instead of launching.
	CreateErr error
	// DeleteErr, while set, is what Delete returns instead of terminating.
	DeleteErr error
	// LaunchedCondition, when set, is put on launched claims: how a provider says it
	// launched other than as planned.
	LaunchedCondition *metav1.Condition
	// Drifted maps providerIDs to what IsDrifted says of them.
	Drifted map[string]cloudprovider.DriftReason
	// RebootErr, while set, is what Reboot returns instead of accepting.
	RebootErr error
	reboots   []string
	instances map[string]*v1.NodeClaim
	creates   map[string]int
	deleted   []string
	seq       int
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New returns a provider offering types, or one on-demand type, "fake.large"
// (2 cpu, 8Gi, 29 pods) in zone test-zone-a, when none are given.
func New(clk clock.Clock, types ...*scheduling.InstanceType) *CloudProvider {
	if len(types) == 0 {
		types = []*scheduling.InstanceType{InstanceType("fake.large", "2", "8Gi", "test-zone-a")}
	}
	return &CloudProvider{clock: clk, Types: types, Drifted: map[string]cloudprovider.DriftReason{},
		instances: map[string]*v1.NodeClaim{}, creates: map[string]int{}}
}

// InstanceType builds an amd64 linux on-demand type offered in the zones, with a
// root volume (the engine places no pod on a type without ephemeral storage).
func InstanceType(name, cpu, memory string, zones ...string) *scheduling.InstanceType {
	offerings := make([]scheduling.Offering, 0, len(zones))
	for _, z := range zones {
		offerings = append(offerings, scheduling.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: 0.1, Available: true})
	}
	return scheduling.NewInstanceType(name, map[string]string{v1.LabelArch: "amd64", v1.LabelOS: "linux"}, corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory), corev1.ResourcePods: resource.MustParse("29"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
	}, offerings, scheduling.DefaultAllocatableSettings())
}

func (p *CloudProvider) Name() string { return "fake" }

// Create launches the cheapest compatible type, or fails with CreateErr.
func (p *CloudProvider) Create(_ context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.creates[nc.Name]++
	if p.CreateErr != nil {
		return nil, p.CreateErr
	}
	it, offering, err := cloudprovider.CheapestCompatible(nc, p.Types)
	if err != nil {
		return nil, err
	}
	p.seq++
	launched := nc.DeepCopy()
	if launched.Labels == nil {
		launched.Labels = map[string]string{}
	}
	for k, v := range it.Requirements.Labels() {
		launched.Labels[k] = v
	}
	launched.Labels[v1.LabelInstanceType] = it.Name
	launched.Labels[v1.LabelTopologyZone] = offering.Zone
	launched.Labels[v1.LabelCapacityType] = offering.CapacityType
	launched.Status.ProviderID = fmt.Sprintf("%s%s/i-%05d", ProviderIDPrefix, offering.Zone, p.seq)
	launched.Status.ImageID = "ami-fake"
	if p.LaunchedCondition != nil {
		launched.Status.Conditions = append(launched.Status.Conditions, *p.LaunchedCondition)
	}
	launched.Status.Capacity = it.Capacity.ToResourceList()
	launched.Status.Allocatable = it.Allocatable.ToResourceList()
	inst := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: nc.Name, Labels: map[string]string{}, CreationTimestamp: metav1.NewTime(p.clock.Now())}}
	for k, v := range launched.Labels {
		inst.Labels[k] = v
	}
	inst.Status = *launched.Status.DeepCopy()
	inst.Status.Conditions = nil
	p.instances[launched.Status.ProviderID] = inst
	return launched, nil
}

// Delete forgets the instance; NodeClaimNotFound once it is gone.
func (p *CloudProvider) Delete(_ context.Context, nc *v1.NodeClaim) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.DeleteErr != nil {
		return p.DeleteErr
	}
	if _, ok := p.instances[nc.Status.ProviderID]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %q not found", nc.Status.ProviderID))
	}
	delete(p.instances, nc.Status.ProviderID)
	p.deleted = append(p.deleted, nc.Status.ProviderID)
	return nil
}

func (p *CloudProvider) Get(_ context.Context, providerID string) (*v1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	inst, ok := p.instances[providerID]
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %q not found", providerID))
	}
	return inst.DeepCopy(), nil
}

// List returns the instances ordered by providerID.
func (p *CloudProvider) List(context.Context) ([]*v1.NodeClaim, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*v1.NodeClaim, 0, len(p.instances))
	for _, inst := range p.instances {
		out = append(out, inst.DeepCopy())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Status.ProviderID < out[j].Status.ProviderID })
	return out, nil
}

func (p *CloudProvider) GetInstanceTypes(context.Context, *v1.NodePool) ([]*scheduling.InstanceType, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Types, nil
}

func (p *CloudProvider) IsDrifted(_ context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.Drifted[nc.Status.ProviderID], nil
}

// Reboot accepts the reboot of a known instance, recording its operation ID.
func (p *CloudProvider) Reboot(_ context.Context, nc *v1.NodeClaim, operationID string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.RebootErr != nil {
		return p.RebootErr
	}
	if _, ok := p.instances[nc.Status.ProviderID]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", nc.Status.ProviderID))
	}
	p.reboots = append(p.reboots, operationID)
	return nil
}

// Reboots are the operation IDs Reboot accepted, in order.
func (p *CloudProvider) Reboots() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.reboots...)
}

// SetDeleteErr makes Delete fail with err from now on; nil lets it terminate again.
func (p *CloudProvider) SetDeleteErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.DeleteErr = err
}

// SetCreateErr makes Create fail with err from now on; nil lets it launch again.
func (p *CloudProvider) SetCreateErr(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.CreateErr = err
}

// AddInstance records an instance as if launched outside the provider (a launch
// whose result was lost, or another process's). Its name is the claim it was
// tagged with; its creation timestamp is the launch time.
func (p *CloudProvider) AddInstance(inst *v1.NodeClaim) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.instances[inst.Status.ProviderID] = inst.DeepCopy()
}

// RemoveInstance makes an instance vanish, as a spot reclaim or a manual
// termination does, without counting as a Delete.
func (p *CloudProvider) RemoveInstance(providerID string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.instances, providerID)
}

// Creates is how many times Create was called for the claim.
func (p *CloudProvider) Creates(claim string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.creates[claim]
}

// Deleted lists the providerIDs Delete terminated, in order.
func (p *CloudProvider) Deleted() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.deleted...)
}

// Instances is how many instances exist.
func (p *CloudProvider) Instances() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.instances)
}
