package aws

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// EC2FleetAPI is the part of EC2 launching, finding and terminating instances use.
type EC2FleetAPI interface {
	EC2API
	LaunchTemplateAPI
	pricing.SpotAPI
	CreateFleet(context.Context, *ec2.CreateFleetInput, ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error)
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
	TerminateInstances(context.Context, *ec2.TerminateInstancesInput, ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error)
}

// MaxInstanceTypes bounds the types one launch offers EC2, as Karpenter does: enough
// for EC2 to find capacity, few enough to keep the request small.
const MaxInstanceTypes = 60

// launchAttempts is how often a launch asks again after EC2 refused every offering
// it was given for lack of capacity, each time without the refused ones.
const launchAttempts = 3

// ProviderIDPrefix starts every providerID: aws:///<zone>/<instance-id>.
const ProviderIDPrefix = "aws:///"

// unfulfillable are CreateFleet error codes that mean "not this offering, now":
// the offering is set aside and the launch tries the rest.
var unfulfillable = sets.New("InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
	"UnfulfillableCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet", "ReservationCapacityExceeded", "SpotMaxPriceTooLow")

// CloudProvider launches NodeClaims as EC2 instances.
type CloudProvider struct {
	kube        client.Client
	ec2         EC2FleetAPI
	settings    Settings
	types       *InstanceTypeProvider
	prices      *pricing.Provider
	unavailable *UnavailableOfferings
	templates   *LaunchTemplates
	clock       clock.Clock

	mu    sync.Mutex
	cache map[string]classTypes
}

// classTypes are the engine's instance types for one version of a class.
type classTypes struct {
	key    string
	types  []*scheduling.InstanceType
	priced *catalog.File
}

// New builds the provider.
func New(kube client.Client, api EC2FleetAPI, settings Settings, prices *pricing.Provider, clk clock.Clock) *CloudProvider {
	return &CloudProvider{
		kube: kube, ec2: api, settings: settings, prices: prices, clock: clk,
		types:       NewInstanceTypeProvider(api, settings.Region, settings, clk),
		unavailable: NewUnavailableOfferings(clk),
		templates:   NewLaunchTemplates(api, settings.ClusterName, clk),
		cache:       map[string]classTypes{},
	}
}

func (c *CloudProvider) Name() string { return "aws" }

// Unavailable is the provider's cache of offerings EC2 refused.
func (c *CloudProvider) Unavailable() *UnavailableOfferings { return c.unavailable }

// LaunchTemplates is the provider's launch template store.
func (c *CloudProvider) LaunchTemplates() *LaunchTemplates { return c.templates }

// nodeClass returns the class a NodePool or NodeClaim refers to, ready to launch.
func (c *CloudProvider) nodeClass(ctx context.Context, ref *v1.NodeClassReference) (*awsv1.EC2NodeClass, error) {
	if ref == nil || ref.Name == "" {
		return nil, fmt.Errorf("nodeClassRef is not set; point it at an EC2NodeClass")
	}
	if ref.Kind != "" && ref.Kind != "EC2NodeClass" {
		return nil, fmt.Errorf("nodeClassRef kind %q is not EC2NodeClass", ref.Kind)
	}
	nc := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, nc); err != nil {
		return nil, fmt.Errorf("getting EC2NodeClass %q, %w", ref.Name, err)
	}
	if nc.DeletionTimestamp != nil {
		return nil, fmt.Errorf("EC2NodeClass %q is being deleted", nc.Name)
	}
	if cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady); cond == nil || cond.Status != metav1.ConditionTrue {
		why := "its status has not been resolved yet"
		for _, c := range nc.Status.Conditions {
			if c.Type != awsv1.ConditionTypeReady && c.Status == metav1.ConditionFalse {
				why = c.Type + ": " + c.Message
				break
			}
		}
		return nil, fmt.Errorf("EC2NodeClass %q is not ready (%s)", nc.Name, why)
	}
	return nc, nil
}

// GetInstanceTypes returns the types the pool's class can launch: in the zones of its
// subnets, with its kubelet's pod limit and reservations, today's prices, and without
// the offerings EC2 recently refused.
func (c *CloudProvider) GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error) {
	class, err := c.nodeClass(ctx, np.Spec.Template.Spec.NodeClassRef)
	if err != nil {
		return nil, err
	}
	types, _, err := c.instanceTypes(ctx, class)
	return types, err
}

func (c *CloudProvider) instanceTypes(ctx context.Context, class *awsv1.EC2NodeClass) ([]*scheduling.InstanceType, *catalog.File, error) {
	f, err := c.types.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	zones := sets.New[string]()
	for _, s := range class.Status.Subnets {
		zones.Insert(s.Zone)
	}
	unavailableSeq := c.unavailable.Purge()
	key := fmt.Sprintf("%s/%d/%v/%d/%d/%p", class.UID, class.Generation, sets.List(zones), c.prices.Version(), unavailableSeq, f)
	c.mu.Lock()
	cached, ok := c.cache[class.Name]
	c.mu.Unlock()
	if ok && cached.key == key {
		// Every provisioning solve asks for every pool's types; pricing them again
		// would redo the work the key says has not changed.
		return cached.types, cached.priced, nil
	}
	priced := c.priced(f, class, zones)
	types := priced.ForEngine(c.allocatableSettings(class))
	c.mu.Lock()
	c.cache[class.Name] = classTypes{key: key, types: types, priced: priced}
	c.mu.Unlock()
	return types, priced, nil
}

// priced narrows the discovered types to the class's zones and prices them.
func (c *CloudProvider) priced(f *catalog.File, class *awsv1.EC2NodeClass, zones sets.Set[string]) *catalog.File {
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, 0, len(f.InstanceTypes))}
	for _, e := range f.InstanceTypes {
		e.Pods = maxPods(e, class.Spec.Kubelet)
		offerings := make([]catalog.Offering, 0, len(e.Offerings))
		for _, o := range e.Offerings {
			if !zones.Has(o.Zone) {
				continue
			}
			price := o.Price
			if p, ok := c.prices.OnDemand(e.Name); ok {
				price = p
			}
			if o.CapacityType == v1.CapacityTypeSpot {
				// Spot never costs more than on-demand; without history, plan with that.
				if p, ok := c.prices.Spot(e.Name, o.Zone); ok && p < price {
					price = p
				}
			}
			o.Price = price
			o.Available = !c.unavailable.IsUnavailable(e.Name, o.Zone, o.CapacityType)
			offerings = append(offerings, o)
		}
		if len(offerings) == 0 {
			continue
		}
		e.Offerings = offerings
		out.InstanceTypes = append(out.InstanceTypes, e)
	}
	return out
}

// maxPods applies the class's kubelet limits to the ENI-derived pod count.
func maxPods(e catalog.Entry, kubelet *awsv1.KubeletConfiguration) int64 {
	pods := e.Pods
	if kubelet == nil {
		return pods
	}
	if kubelet.MaxPods != nil {
		pods = int64(*kubelet.MaxPods)
	}
	if kubelet.PodsPerCore != nil && *kubelet.PodsPerCore > 0 {
		cpu := resource.MustParse(e.CPU)
		if perCore := int64(*kubelet.PodsPerCore) * cpu.Value(); perCore < pods {
			pods = perCore
		}
	}
	return pods
}

func (c *CloudProvider) allocatableSettings(class *awsv1.EC2NodeClass) scheduling.AllocatableSettings {
	s := scheduling.DefaultAllocatableSettings()
	s.VMMemoryOverheadPercent = c.settings.VMMemoryOverheadPercent
	if k := class.Spec.Kubelet; k != nil {
		s.KubeReserved = resourceList(k.KubeReserved)
		s.SystemReserved = resourceList(k.SystemReserved)
		s.EvictionHard = k.EvictionHard
	}
	return s
}

func resourceList(m map[string]string) corev1.ResourceList {
	if len(m) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for k, v := range m {
		if q, err := resource.ParseQuantity(v); err == nil {
			out[corev1.ResourceName(k)] = q
		}
	}
	return out
}

// candidate is an instance type a launch may use, with its offerings of one
// capacity type in the zones the claim allows.
type candidate struct {
	it        *scheduling.InstanceType
	entry     catalog.Entry
	offerings []scheduling.Offering
}

// Create launches the claim with CreateFleet, offering EC2 every type and zone the
// claim allows. Offerings EC2 refuses for lack of capacity are set aside for a few
// minutes, and the launch asks again with the rest.
func (c *CloudProvider) Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error) {
	class, err := c.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		return nil, fmt.Errorf("resolving the node class, %w", err)
	}
	reqs, err := cloudprovider.Requirements(nc)
	if err != nil {
		return nil, err
	}
	var refused []string
	for attempt := 0; attempt < launchAttempts; attempt++ {
		types, priced, err := c.instanceTypes(ctx, class)
		if err != nil {
			return nil, err
		}
		capacityType, candidates := c.candidates(nc, reqs, types, priced)
		if len(candidates) == 0 {
			msg := "no instance type, zone and capacity type the claim allows has capacity"
			if len(refused) > 0 {
				msg += "; EC2 refused " + strings.Join(refused, ", ")
			}
			return nil, cloudprovider.NewInsufficientCapacityError(errors.New(msg))
		}
		launched, errs, err := c.launch(ctx, nc, class, capacityType, candidates)
		if err != nil || launched != nil {
			return launched, err
		}
		refused = append(refused, errs...)
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("EC2 refused every offering: %s", strings.Join(refused, ", ")))
}

// candidates picks the capacity type (spot when the claim allows it and any spot
// offering is available, as spot is what the claim was priced for) and the cheapest
// MaxInstanceTypes types that offer it.
func (c *CloudProvider) candidates(nc *v1.NodeClaim, reqs scheduling.Requirements, types []*scheduling.InstanceType, priced *catalog.File) (string, []candidate) {
	requests := scheduling.FromResourceList(nc.Spec.Resources.Requests)
	byCapacityType := map[string][]candidate{}
	entries := make(map[string]catalog.Entry, len(priced.InstanceTypes))
	for _, e := range priced.InstanceTypes {
		entries[e.Name] = e
	}
	for _, it := range types {
		if !scheduling.Compatible(it, reqs) || !requests.Fits(it.Allocatable) {
			continue
		}
		perType := map[string][]scheduling.Offering{}
		for _, o := range it.Offerings {
			if !o.Available || !reqs.Get(v1.LabelTopologyZone).Has(o.Zone) || !reqs.Get(v1.LabelCapacityType).Has(o.CapacityType) {
				continue
			}
			perType[o.CapacityType] = append(perType[o.CapacityType], o)
		}
		for ct, offerings := range perType {
			byCapacityType[ct] = append(byCapacityType[ct], candidate{it: it, entry: entries[it.Name], offerings: offerings})
		}
	}
	capacityType := v1.CapacityTypeOnDemand
	if len(byCapacityType[v1.CapacityTypeSpot]) > 0 {
		capacityType = v1.CapacityTypeSpot
	}
	out := byCapacityType[capacityType]
	for i := range out {
		sort.Slice(out[i].offerings, func(a, b int) bool { return out[i].offerings[a].Price < out[i].offerings[b].Price })
	}
	sort.SliceStable(out, func(i, j int) bool {
		if pi, pj := out[i].offerings[0].Price, out[j].offerings[0].Price; pi != pj {
			return pi < pj
		}
		return out[i].it.Name < out[j].it.Name
	})
	if len(out) > MaxInstanceTypes {
		out = out[:MaxInstanceTypes]
	}
	return capacityType, out
}

// launch makes one CreateFleet call. It returns the launched claim, or the offerings
// EC2 refused for capacity (now marked unavailable) when nothing launched.
func (c *CloudProvider) launch(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass, capacityType string, candidates []candidate) (*v1.NodeClaim, []string, error) {
	subnets := bestSubnets(class)
	configs, err := c.launchTemplateConfigs(ctx, nc, class, candidates, subnets)
	if err != nil {
		return nil, nil, err
	}
	tags := c.instanceTags(nc, class)
	out, err := c.ec2.CreateFleet(ctx, &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: ec2types.DefaultTargetCapacityType(capacityType),
		},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
		},
	})
	if err != nil {
		return nil, nil, fmt.Errorf("creating fleet, %w", err)
	}
	var refused, other []string
	for _, e := range out.Errors {
		code := aws.ToString(e.ErrorCode)
		var it, zone string
		if lt := e.LaunchTemplateAndOverrides; lt != nil && lt.Overrides != nil {
			it, zone = string(lt.Overrides.InstanceType), aws.ToString(lt.Overrides.AvailabilityZone)
		}
		if unfulfillable.Has(code) && it != "" {
			c.unavailable.Mark(it, zone, capacityType)
			refused = append(refused, fmt.Sprintf("%s %s in %s (%s)", capacityType, it, zone, code))
			continue
		}
		other = append(other, fmt.Sprintf("%s: %s", code, aws.ToString(e.ErrorMessage)))
	}
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) == 0 {
			continue
		}
		return c.launched(nc, class, inst, candidates), nil, nil
	}
	if len(other) > 0 && len(refused) == 0 {
		return nil, nil, fmt.Errorf("creating fleet: %s", strings.Join(other, "; "))
	}
	return nil, refused, nil
}

// launched describes the instance CreateFleet returned as the launched claim.
func (c *CloudProvider) launched(nc *v1.NodeClaim, class *awsv1.EC2NodeClass, inst ec2types.CreateFleetInstance, candidates []candidate) *v1.NodeClaim {
	id := inst.InstanceIds[0]
	var zone, imageID string
	if lt := inst.LaunchTemplateAndOverrides; lt != nil && lt.Overrides != nil {
		zone = aws.ToString(lt.Overrides.AvailabilityZone)
		imageID = aws.ToString(lt.Overrides.ImageId)
	}
	capacityType := v1.CapacityTypeOnDemand
	if inst.Lifecycle == ec2types.InstanceLifecycleSpot {
		capacityType = v1.CapacityTypeSpot
	}
	var chosen candidate
	for _, cand := range candidates {
		if cand.it.Name == string(inst.InstanceType) {
			chosen = cand
		}
	}
	if imageID == "" {
		imageID = imageFor(class, chosen.entry)
	}
	out := nc.DeepCopy()
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	for k, v := range chosen.entry.NodeLabels() {
		out.Labels[k] = v
	}
	out.Labels[v1.LabelInstanceType] = string(inst.InstanceType)
	out.Labels[v1.LabelTopologyZone] = zone
	out.Labels[v1.LabelCapacityType] = capacityType
	for _, s := range class.Status.Subnets {
		if s.Zone == zone && s.ZoneID != "" {
			out.Labels[v1.LabelZoneID] = s.ZoneID
		}
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
	out.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	out.Status.ProviderID = ProviderIDPrefix + zone + "/" + id
	out.Status.ImageID = imageID
	if chosen.it != nil {
		out.Status.Capacity = chosen.it.Capacity.ToResourceList()
		out.Status.Allocatable = chosen.it.Allocatable.ToResourceList()
	}
	return out
}

func (c *CloudProvider) instanceTags(nc *v1.NodeClaim, class *awsv1.EC2NodeClass) []ec2types.Tag {
	tags := map[string]string{}
	for k, v := range class.Spec.Tags {
		tags[k] = v
	}
	for k, v := range map[string]string{
		ClusterTag(c.settings.ClusterName): "owned",
		TagCluster:                         c.settings.ClusterName,
		TagEKSCluster:                      c.settings.ClusterName,
		TagNodePool:                        nc.Labels[v1.LabelNodePool],
		TagNodeClaim:                       nc.Name,
		TagNodeClass:                       class.Name,
		TagName:                            nc.Name,
	} {
		tags[k] = v
	}
	out := make([]ec2types.Tag, 0, len(tags))
	for _, k := range sortedKeys(tags) {
		out = append(out, ec2types.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}

// bestSubnets picks, per zone, the class's subnet with the most free addresses.
func bestSubnets(class *awsv1.EC2NodeClass) map[string]string {
	out := map[string]string{}
	for _, s := range class.Status.Subnets {
		if _, ok := out[s.Zone]; !ok {
			// Status lists subnets with the most free addresses first.
			out[s.Zone] = s.ID
		}
	}
	return out
}

// family is the AMI family the class's images belong to.
func family(class *awsv1.EC2NodeClass) string {
	for _, t := range class.Spec.AMISelectorTerms {
		if f, ok := userdata.FamilyOfAlias(t.Alias); ok && t.Alias != "" {
			return f
		}
	}
	if class.Spec.AMIFamily != nil {
		return *class.Spec.AMIFamily
	}
	return userdata.FamilyCustom
}

// imageFor picks the newest resolved image the type can boot.
func imageFor(class *awsv1.EC2NodeClass, e catalog.Entry) string {
	labels := e.NodeLabels()
	for _, ami := range class.Status.AMIs {
		ok := true
		for _, r := range ami.Requirements {
			req, err := scheduling.NewRequirement(r.Key, v1.RequirementOperator(r.Operator), r.Values...)
			if err != nil {
				ok = false
				break
			}
			v, has := labels[r.Key]
			if (has && !req.Has(v)) || (!has && r.Operator == string(corev1.NodeSelectorOpIn)) {
				ok = false
				break
			}
		}
		if ok {
			return ami.ID
		}
	}
	return ""
}

// launchTemplateConfigs groups the candidates by launch template (image and pod
// limit), cheapest first: EC2's lowest-price strategy, and the emulator, take the
// order as given when prices tie.
func (c *CloudProvider) launchTemplateConfigs(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass, candidates []candidate, subnets map[string]string) ([]ec2types.FleetLaunchTemplateConfigRequest, error) {
	fam := family(class)
	var configs []ec2types.FleetLaunchTemplateConfigRequest
	index := map[string]int{}
	for _, cand := range candidates {
		image := imageFor(class, cand.entry)
		if image == "" {
			continue
		}
		pods := int32(cand.entry.Pods)
		ud, err := userdata.Render(userdata.Options{
			Family: fam, ClusterName: c.settings.ClusterName, ClusterEndpoint: c.settings.ClusterEndpoint,
			ClusterCABundle: c.settings.ClusterCABundle, ClusterCIDR: c.settings.ClusterCIDR,
			Kubelet: class.Spec.Kubelet, MaxPods: pods, Labels: userDataLabels(nc), Taints: registrationTaints(nc),
			Custom: class.Spec.UserData,
		})
		if err != nil {
			return nil, fmt.Errorf("rendering user data for EC2NodeClass %q, %w", class.Name, err)
		}
		devices := class.Spec.BlockDeviceMappings
		if len(devices) == 0 {
			devices = DefaultBlockDevices(fam)
		}
		groups := make([]string, len(class.Status.SecurityGroups))
		for i, g := range class.Status.SecurityGroups {
			groups[i] = g.ID
		}
		lt := &LaunchTemplate{
			ClassName: class.Name, ImageID: image, UserData: ud, SecurityGroupIDs: groups,
			InstanceProfile: class.Status.InstanceProfile, BlockDeviceMappings: devices, MetadataOptions: class.Spec.MetadataOptions,
			DetailedMonitoring: aws.ToBool(class.Spec.DetailedMonitoring), AssociatePublicIP: class.Spec.AssociatePublicIPAddress, Tags: class.Spec.Tags,
		}
		name, err := c.templates.Ensure(ctx, lt)
		if err != nil {
			return nil, err
		}
		i, ok := index[name]
		if !ok {
			i = len(configs)
			index[name] = i
			configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
				LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
			})
		}
		for _, o := range cand.offerings {
			subnet, ok := subnets[o.Zone]
			if !ok {
				continue
			}
			configs[i].Overrides = append(configs[i].Overrides, ec2types.FleetLaunchTemplateOverridesRequest{
				InstanceType: ec2types.InstanceType(cand.it.Name), SubnetId: aws.String(subnet), AvailabilityZone: aws.String(o.Zone), ImageId: aws.String(image),
			})
		}
	}
	if len(configs) == 0 {
		return nil, fmt.Errorf("EC2NodeClass %q has no image for the architectures of the claim's instance types; check amiSelectorTerms", class.Name)
	}
	return configs, nil
}

// userDataLabels are the labels the kubelet registers the node with: the claim's own
// (its pool and template labels), minus those the kubelet may not set and those
// the fleet decides.
func userDataLabels(nc *v1.NodeClaim) map[string]string {
	out := map[string]string{}
	for k, v := range nc.Labels {
		switch k {
		case v1.LabelCapacityType, v1.LabelTopologyZone, v1.LabelInstanceType, v1.LabelHostname, v1.LabelZoneID:
			continue
		}
		domain, _, found := strings.Cut(k, "/")
		if found && (domain == "kubernetes.io" || domain == "k8s.io" || strings.HasSuffix(domain, ".kubernetes.io") || strings.HasSuffix(domain, ".k8s.io")) &&
			!strings.HasPrefix(domain, "node.kubernetes.io") && !strings.HasPrefix(domain, "node-restriction.kubernetes.io") {
			continue
		}
		out[k] = v
	}
	return out
}

// registrationTaints: the node joins unschedulable until the registration controller
// has synced it with its claim.
func registrationTaints(nc *v1.NodeClaim) []corev1.Taint {
	taints := append(append([]corev1.Taint{}, nc.Spec.Taints...), nc.Spec.StartupTaints...)
	return append(taints, v1.UnregisteredNoExecuteTaint)
}

// instanceID reads the instance id from aws:///<zone>/<id>.
func instanceID(providerID string) (string, error) {
	rest, ok := strings.CutPrefix(providerID, ProviderIDPrefix)
	if !ok {
		return "", fmt.Errorf("providerID %q is not an AWS one (aws:///<zone>/<instance-id>)", providerID)
	}
	_, id, ok := strings.Cut(rest, "/")
	if !ok || !strings.HasPrefix(id, "i-") {
		return "", fmt.Errorf("providerID %q has no instance id", providerID)
	}
	return id, nil
}

// describe returns the instance, or a NodeClaimNotFoundError once it is terminated.
func (c *CloudProvider) describe(ctx context.Context, id string) (*ec2types.Instance, error) {
	out, err := c.ec2.DescribeInstances(ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if isCode(err, "InvalidInstanceID.NotFound", "InvalidInstanceID.Malformed") {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	if err != nil {
		return nil, fmt.Errorf("describing instance %s, %w", id, err)
	}
	for _, r := range out.Reservations {
		for i := range r.Instances {
			inst := &r.Instances[i]
			if inst.State != nil && inst.State.Name == ec2types.InstanceStateNameTerminated {
				return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s is terminated", id))
			}
			return inst, nil
		}
	}
	return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("instance %s not found", id))
}

// Delete terminates the claim's instance. It reports NodeClaimNotFound once the
// instance is terminated, so the caller knows nothing is left to pay for.
func (c *CloudProvider) Delete(ctx context.Context, nc *v1.NodeClaim) error {
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return cloudprovider.NewNodeClaimNotFoundError(err)
	}
	if _, err := c.describe(ctx, id); err != nil {
		return err
	}
	if _, err := c.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{id}}); err != nil {
		if isCode(err, "InvalidInstanceID.NotFound") {
			return cloudprovider.NewNodeClaimNotFoundError(err)
		}
		return fmt.Errorf("terminating instance %s, %w", id, err)
	}
	return nil
}

// Get describes the instance behind a providerID as a NodeClaim.
func (c *CloudProvider) Get(ctx context.Context, providerID string) (*v1.NodeClaim, error) {
	id, err := instanceID(providerID)
	if err != nil {
		return nil, cloudprovider.NewNodeClaimNotFoundError(err)
	}
	inst, err := c.describe(ctx, id)
	if err != nil {
		return nil, err
	}
	return c.toNodeClaim(ctx, inst), nil
}

// List returns the cluster's instances that are not terminated.
func (c *CloudProvider) List(ctx context.Context) ([]*v1.NodeClaim, error) {
	var out []*v1.NodeClaim
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: aws.String("tag:" + ClusterTag(c.settings.ClusterName)), Values: []string{"owned"}},
		{Name: aws.String("tag-key"), Values: []string{TagNodePool}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing instances, %w", err)
		}
		for _, r := range page.Reservations {
			for i := range r.Instances {
				out = append(out, c.toNodeClaim(ctx, &r.Instances[i]))
			}
		}
	}
	return out, nil
}

func (c *CloudProvider) toNodeClaim(ctx context.Context, inst *ec2types.Instance) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{}, Annotations: map[string]string{}}}
	zone := ""
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	for _, t := range inst.Tags {
		switch aws.ToString(t.Key) {
		case TagNodeClaim:
			nc.Name = aws.ToString(t.Value)
		case TagNodePool:
			nc.Labels[v1.LabelNodePool] = aws.ToString(t.Value)
		case TagNodeClass:
			nc.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: aws.ToString(t.Value)}
		}
	}
	capacityType := v1.CapacityTypeOnDemand
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = v1.CapacityTypeSpot
	}
	nc.Labels[v1.LabelInstanceType] = string(inst.InstanceType)
	nc.Labels[v1.LabelTopologyZone] = zone
	nc.Labels[v1.LabelCapacityType] = capacityType
	if f, err := c.types.List(ctx); err == nil {
		if e, ok := f.Find(string(inst.InstanceType)); ok {
			for k, v := range e.NodeLabels() {
				nc.Labels[k] = v
			}
			nc.Status.Capacity = e.Capacity()
		}
	}
	if inst.LaunchTime != nil {
		nc.CreationTimestamp = metav1.NewTime(*inst.LaunchTime)
	}
	nc.Status.ProviderID = ProviderIDPrefix + zone + "/" + aws.ToString(inst.InstanceId)
	nc.Status.ImageID = aws.ToString(inst.ImageId)
	return nc
}

// Drift reasons.
const (
	DriftAMI           cloudprovider.DriftReason = "AMIDrift"
	DriftSubnet        cloudprovider.DriftReason = "SubnetDrift"
	DriftSecurityGroup cloudprovider.DriftReason = "SecurityGroupDrift"
	DriftNodeClass     cloudprovider.DriftReason = "NodeClassDrift"
)

// IsDrifted compares the claim's instance with what its class resolves to now.
func (c *CloudProvider) IsDrifted(ctx context.Context, nc *v1.NodeClaim) (cloudprovider.DriftReason, error) {
	class, err := c.nodeClass(ctx, nc.Spec.NodeClassRef)
	if err != nil {
		// An unready class cannot say what nodes should look like; no verdict.
		return "", nil
	}
	if h, ok := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; ok &&
		nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] == awsv1.EC2NodeClassHashVersion && h != class.Hash() {
		return DriftNodeClass, nil
	}
	id, err := instanceID(nc.Status.ProviderID)
	if err != nil {
		return "", nil
	}
	inst, err := c.describe(ctx, id)
	if err != nil {
		return "", err
	}
	return drift(class, inst), nil
}

// drift compares an instance with the class's resolved images, subnets and groups.
func drift(class *awsv1.EC2NodeClass, inst *ec2types.Instance) cloudprovider.DriftReason {
	images := sets.New[string]()
	for _, a := range class.Status.AMIs {
		images.Insert(a.ID)
	}
	if len(images) > 0 && !images.Has(aws.ToString(inst.ImageId)) {
		return DriftAMI
	}
	subnets := sets.New[string]()
	for _, s := range class.Status.Subnets {
		subnets.Insert(s.ID)
	}
	if len(subnets) > 0 && inst.SubnetId != nil && !subnets.Has(*inst.SubnetId) {
		return DriftSubnet
	}
	want, have := sets.New[string](), sets.New[string]()
	for _, g := range class.Status.SecurityGroups {
		want.Insert(g.ID)
	}
	for _, g := range inst.SecurityGroups {
		have.Insert(aws.ToString(g.GroupId))
	}
	if len(want) > 0 && len(have) > 0 && !want.Equal(have) {
		return DriftSecurityGroup
	}
	return ""
}
