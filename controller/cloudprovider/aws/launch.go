package aws

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/classtypes"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// MaxInstanceTypes bounds the types one launch offers EC2, as Karpenter does: enough
// for EC2 to find capacity, few enough to keep the request small.
const MaxInstanceTypes = 60

// launchAttempts is how often a launch asks again after EC2 refused every offering
// it was given for lack of capacity, each time without the refused ones.
const launchAttempts = 3

// unfulfillable are CreateFleet error codes that mean "not this offering, now":
// the offering is set aside and the launch tries the rest.
var unfulfillable = sets.New("InsufficientInstanceCapacity", "MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
	"UnfulfillableCapacity", "Unsupported", "InsufficientFreeAddressesInSubnet", "ReservationCapacityExceeded", "SpotMaxPriceTooLow")

// spotRoleMissing is the code CreateFleet answers a spot launch with in an account
// that has no spot service-linked role (AWSServiceRoleForEC2Spot) and whose caller
// may not create it: no spot offering can launch until someone creates the role.
const spotRoleMissing = "AuthFailure.ServiceLinkedRoleCreationNotPermitted"

// SpotRoleMissingMessage says what to do about spotRoleMissing.
const SpotRoleMissingMessage = "spot needs the service-linked role AWSServiceRoleForEC2Spot, which this account lacks and the controller may not create (" + spotRoleMissing +
	"); create it once with `aws iam create-service-linked-role --aws-service-name spot.amazonaws.com`"

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
	if apierrors.IsNotFound(err) {
		// No class, no capacity: the claim goes and its pods are planned again, as
		// Karpenter treats it.
		return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("resolving the node class, %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("resolving the node class, %w", err)
	}
	reqs, err := cloudprovider.Requirements(nc)
	if err != nil {
		return nil, err
	}
	if existing, err := c.existing(ctx, nc, class); err != nil || existing != nil {
		return existing, err
	}
	var refused []string
	spotRefused := false
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
		if launched != nil && spotRefused {
			// Launched, but not as planned: say why on the claim.
			meta.SetStatusCondition(&launched.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue,
				Reason: "SpotUnavailable", Message: "launched " + capacityType + " instead of spot: " + SpotRoleMissingMessage})
		}
		if err != nil || launched != nil {
			return launched, err
		}
		for _, e := range errs {
			spotRefused = spotRefused || strings.Contains(e, spotRoleMissing)
		}
		refused = append(refused, errs...)
	}
	return nil, cloudprovider.NewInsufficientCapacityError(fmt.Errorf("EC2 refused every offering: %s", strings.Join(refused, ", ")))
}

// candidates picks the capacity type (a capacity reservation when the claim allows
// reserved and one has room, else spot when the claim allows it and any spot offering
// is available, as spot is what the claim was priced for) and the cheapest
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
	// A reservation is paid for already: fill it before buying spot or on-demand.
	capacityType := v1.CapacityTypeOnDemand
	switch {
	case len(byCapacityType[v1.CapacityTypeReserved]) > 0:
		capacityType = v1.CapacityTypeReserved
	case len(byCapacityType[v1.CapacityTypeSpot]) > 0:
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

// launch makes one CreateFleet call (two when a template it was told exists is
// gone). It returns the launched claim, or the offerings EC2 refused for capacity
// (now marked unavailable) when nothing launched.
func (c *CloudProvider) launch(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass, capacityType string, candidates []candidate) (*v1.NodeClaim, []string, error) {
	// A launch EC2 answered with a failure is over: the next one is a new request,
	// which the first one's token would only replay (the same failure, until the
	// claim times out). Only a request that got no answer keeps its token.
	attempt := c.failedLaunches(nc, 0)
	out, err := c.createFleet(ctx, nc, class, capacityType, candidates, attempt)
	if launchTemplateNotFound(out, err) {
		// The cache said the template exists, but someone (another replica's sweep,
		// a person) deleted it: createFleet forgot it, so this makes it again. The
		// first request launched nothing, so it is a new request with its own token.
		out, err = c.createFleet(ctx, nc, class, capacityType, candidates, attempt+"template-recreated")
	}
	if err == nil && len(out.Errors) > 0 && !launchedAny(out) {
		c.failedLaunches(nc, 1)
	}
	if err != nil {
		return nil, nil, err
	}
	var refused, other []string
	for _, e := range out.Errors {
		code := aws.ToString(e.ErrorCode)
		var it, zone string
		if lt := e.LaunchTemplateAndOverrides; lt != nil && lt.Overrides != nil {
			it, zone = string(lt.Overrides.InstanceType), aws.ToString(lt.Overrides.AvailabilityZone)
		}
		InstanceLaunchFailures.WithLabelValues(zone, zoneID(class, zone), capacityType, code).Inc()
		if code == spotRoleMissing && capacityType == v1.CapacityTypeSpot {
			// Every spot offering fails alike: the claim falls back to on-demand
			// where it allows it, and no launch asks for spot until the TTL passes.
			if !c.unavailable.IsUnavailable("", "", v1.CapacityTypeSpot) {
				log.FromContext(ctx).Error(errors.New(spotRoleMissing), SpotRoleMissingMessage)
			}
			c.unavailable.MarkCapacityType(v1.CapacityTypeSpot)
			if !slices.Contains(refused, "spot ("+SpotRoleMissingMessage+")") {
				refused = append(refused, "spot ("+SpotRoleMissingMessage+")")
			}
			continue
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
		return c.launched(nc, class, inst, capacityType, candidates), nil, nil
	}
	if len(other) > 0 && len(refused) == 0 {
		return nil, nil, fmt.Errorf("creating fleet: %s", strings.Join(other, "; "))
	}
	return nil, refused, nil
}

// failedLaunches adds to the count of the claim's launches EC2 answered with a
// failure, and returns it as the token's attempt component ("" before any).
func (c *CloudProvider) failedLaunches(nc *v1.NodeClaim, add int) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.launchFailures == nil {
		c.launchFailures = map[string]int{}
	}
	key := string(nc.UID) + "/" + nc.Name
	c.launchFailures[key] += add
	if n := c.launchFailures[key]; n > 0 {
		return fmt.Sprintf("after-%d-failed", n)
	}
	delete(c.launchFailures, key)
	return ""
}

func launchedAny(out *ec2.CreateFleetOutput) bool {
	for _, inst := range out.Instances {
		if len(inst.InstanceIds) > 0 {
			return true
		}
	}
	return false
}

// createFleet asks EC2 for the claim's instance from the candidates' launch
// templates. A template EC2 does not know is forgotten, so the next ask makes it.
func (c *CloudProvider) createFleet(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass, capacityType string, candidates []candidate, retry string) (*ec2.CreateFleetOutput, error) {
	subnets := bestSubnets(class)
	configs, err := c.launchTemplateConfigs(ctx, nc, class, capacityType, candidates, subnets)
	if err != nil {
		return nil, err
	}
	tags := c.instanceTags(nc, class)
	input := &ec2.CreateFleetInput{
		Type:                  ec2types.FleetTypeInstant,
		LaunchTemplateConfigs: configs,
		TargetCapacitySpecification: &ec2types.TargetCapacitySpecificationRequest{
			TotalTargetCapacity:       aws.Int32(1),
			DefaultTargetCapacityType: fleetCapacityType(class, capacityType, candidates),
		},
		OnDemandOptions: &ec2types.OnDemandOptionsRequest{AllocationStrategy: ec2types.FleetOnDemandAllocationStrategyLowestPrice},
		SpotOptions:     &ec2types.SpotOptionsRequest{AllocationStrategy: ec2types.SpotAllocationStrategyPriceCapacityOptimized},
		TagSpecifications: []ec2types.TagSpecification{
			{ResourceType: ec2types.ResourceTypeInstance, Tags: tags},
			{ResourceType: ec2types.ResourceTypeVolume, Tags: tags},
			{ResourceType: ec2types.ResourceTypeFleet, Tags: tags},
		},
		// The class's context (an EC2 reserved field, for accounts AWS enabled it on)
		// goes to EC2 as the class gives it.
		Context: class.Spec.Context,
	}
	if input.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeReservedCapacity {
		// An interruptible reservation is reserved capacity of its own type.
		input.ReservedCapacityOptions = &ec2types.ReservedCapacityOptionsRequest{ReservationTypes: []ec2types.FleetReservationType{ec2types.FleetReservationTypeInterruptibleCapacityReservation}}
	}
	input.ClientToken = aws.String(clientToken(nc, input, retry))
	out, err := c.ec2.CreateFleet(ctx, input)
	if launchTemplateNotFound(out, err) {
		for _, cfg := range configs {
			c.templates.Forget(aws.ToString(cfg.LaunchTemplateSpecification.LaunchTemplateName))
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating fleet, %w", err)
	}
	return out, nil
}

// fleetCapacityType is the fleet's market: reservations are on-demand capacity (the
// launch template targets the reservation), except capacity blocks, their own market.
func fleetCapacityType(class *awsv1.EC2NodeClass, capacityType string, candidates []candidate) ec2types.DefaultTargetCapacityType {
	if capacityType != v1.CapacityTypeReserved {
		return ec2types.DefaultTargetCapacityType(capacityType)
	}
	for _, cand := range candidates {
		for _, o := range cand.offerings {
			if reservationType(class, o.ReservationID) == nodeclass.ReservationTypeCapacityBlock {
				return ec2types.DefaultTargetCapacityTypeCapacityBlock
			}
			if interruptible(class, o.ReservationID) {
				return ec2types.DefaultTargetCapacityTypeReservedCapacity
			}
		}
	}
	return ec2types.DefaultTargetCapacityTypeOnDemand
}

// launchTemplateNotFound says whether EC2 answered that a launch template of the
// request does not exist, for the whole request or for a part of it.
func launchTemplateNotFound(out *ec2.CreateFleetOutput, err error) bool {
	if isCode(err, launchTemplateNotFoundCodes...) {
		return true
	}
	if err != nil || out == nil || len(out.Instances) > 0 {
		return false
	}
	for _, e := range out.Errors {
		if slices.Contains(launchTemplateNotFoundCodes, aws.ToString(e.ErrorCode)) {
			return true
		}
	}
	return false
}

var launchTemplateNotFoundCodes = []string{"InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound", "InvalidLaunchTemplateId.VersionNotFound"}

// launched describes the instance CreateFleet returned as the launched claim.
func (c *CloudProvider) launched(nc *v1.NodeClaim, class *awsv1.EC2NodeClass, inst ec2types.CreateFleetInstance, fleetCapacityType string, candidates []candidate) *v1.NodeClaim {
	var zone, imageID, template string
	if lt := inst.LaunchTemplateAndOverrides; lt != nil && lt.Overrides != nil {
		zone = aws.ToString(lt.Overrides.AvailabilityZone)
		imageID = aws.ToString(lt.Overrides.ImageId)
		if lt.LaunchTemplateSpecification != nil {
			template = aws.ToString(lt.LaunchTemplateSpecification.LaunchTemplateName)
		}
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
	out := launchedClaim(nc, class, inst.InstanceIds[0], string(inst.InstanceType), zone, imageID, capacityType, chosen)
	if fleetCapacityType == v1.CapacityTypeReserved {
		c.mu.Lock()
		id := c.reservedTemplates[template]
		c.mu.Unlock()
		if id == "" {
			// The emulator does not echo the template: the offering of the type and
			// zone says which reservation.
			for _, o := range chosen.offerings {
				if o.Zone == zone && o.ReservationID != "" {
					id = o.ReservationID
				}
			}
		}
		if id != "" {
			labelReservation(out, class, id)
			c.reserved.launched(id)
		}
	}
	return out
}

// launchedClaim is the claim as launched: its instance's type, zone, capacity type,
// image and capacity, and the class hash it was launched with.
func launchedClaim(nc *v1.NodeClaim, class *awsv1.EC2NodeClass, id, instanceType, zone, imageID, capacityType string, chosen candidate) *v1.NodeClaim {
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
	out.Labels[v1.LabelInstanceType] = instanceType
	out.Labels[v1.LabelTopologyZone] = zone
	out.Labels[v1.LabelCapacityType] = capacityType
	if id := zoneID(class, zone); id != "" {
		out.Labels[v1.LabelZoneID] = id
	}
	if p := partitionOf(nc, class); p > 0 {
		out.Labels[v1.LabelPlacementGroupPartition] = fmt.Sprint(p)
	}
	if out.Annotations == nil {
		out.Annotations = map[string]string{}
	}
	out.Annotations[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
	out.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
	// Karpenter, taking over after a rollback, deletes a profile of its own path that
	// no class's status and no claim names: a node launched with it would lose its
	// credentials.
	if class.Status.InstanceProfile != "" {
		out.Annotations[awsv1.AnnotationInstanceProfile] = class.Status.InstanceProfile
	}
	out.Status.ProviderID = ProviderIDPrefix + zone + "/" + id
	out.Status.ImageID = imageID
	if chosen.it != nil {
		out.Status.Capacity = chosen.it.Capacity.ToResourceList()
		out.Status.Allocatable = chosen.it.Allocatable.ToResourceList()
	}
	return out
}

// existing returns the claim as launched when an instance tagged with its name is
// already pending or running: a launch whose result was never recorded (a crash
// between CreateFleet and the status write, or a claim read from a stale cache)
// must not start a second instance.
func (c *CloudProvider) existing(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass) (*v1.NodeClaim, error) {
	inst, err := c.launchedFor.get(ctx, nc.Name)
	if err != nil {
		return nil, fmt.Errorf("looking for an instance already launched for the claim, %w", err)
	}
	if inst == nil {
		return nil, nil
	}
	types, priced, err := c.instanceTypes(ctx, class)
	if err != nil {
		return nil, err
	}
	var chosen candidate
	for _, it := range types {
		if it.Name == string(inst.InstanceType) {
			chosen.it = it
		}
	}
	if e, ok := priced.Find(string(inst.InstanceType)); ok {
		chosen.entry = e
	}
	capacityType := v1.CapacityTypeOnDemand
	if inst.InstanceLifecycle == ec2types.InstanceLifecycleTypeSpot {
		capacityType = v1.CapacityTypeSpot
	}
	var zone string
	if inst.Placement != nil {
		zone = aws.ToString(inst.Placement.AvailabilityZone)
	}
	claim := launchedClaim(nc, class, aws.ToString(inst.InstanceId), string(inst.InstanceType), zone, aws.ToString(inst.ImageId), capacityType, chosen)
	if id := aws.ToString(inst.CapacityReservationId); id != "" {
		labelReservation(claim, class, id)
	}
	return claim, nil
}

// clientToken makes CreateFleet idempotent for one launch attempt: the claim's UID
// and a hash of what the attempt asks for. An SDK retry, or the same claim launched
// again before its instance is visible to DescribeInstances, sends the same request
// and EC2 answers with the first fleet instead of starting a second instance; an
// attempt that asks for other offerings (after EC2 refused some) is a new request,
// which EC2 would refuse under a reused token.
func clientToken(nc *v1.NodeClaim, input *ec2.CreateFleetInput, retry string) string {
	b, _ := json.Marshal(input)
	sum := sha256.Sum256(append(b, retry...))
	attempt := hex.EncodeToString(sum[:8])
	if nc.UID != "" {
		// 36 + 1 + 16 characters, within EC2's 64.
		return string(nc.UID) + "-" + attempt
	}
	name := sha256.Sum256([]byte(nc.Name))
	return hex.EncodeToString(name[:16]) + "-" + attempt
}

// poolTags are the tags of everything a launch for the pool creates, as Karpenter
// sets them: the class's own, then the cluster, EKS cluster, pool and class tags the
// shipped IAM policy requires on each resource CreateFleet makes. They leave out the
// claim, so launch templates (which carry them to the network interface and the spot
// request) stay shared by the pool's launches.
func (c *CloudProvider) poolTags(nc *v1.NodeClaim, class *awsv1.EC2NodeClass) map[string]string {
	tags := map[string]string{}
	for k, v := range class.Spec.Tags {
		tags[k] = v
	}
	for k, v := range map[string]string{
		ClusterTag(c.settings.ClusterName): "owned",
		TagCluster:                         c.settings.ClusterName,
		TagEKSCluster:                      c.settings.ClusterName,
		TagNodePool:                        nc.Labels[v1.LabelNodePool],
		TagNodeClass:                       class.Name,
	} {
		tags[k] = v
	}
	return tags
}

// instanceTags are poolTags plus the claim's name, which lets a restarted controller
// (and garbage collection) find the claim's instance.
func (c *CloudProvider) instanceTags(nc *v1.NodeClaim, class *awsv1.EC2NodeClass) []ec2types.Tag {
	tags := c.poolTags(nc, class)
	tags[TagNodeClaim] = nc.Name
	tags[TagName] = nc.Name
	return ec2Tags(tags)
}

func ec2Tags(tags map[string]string) []ec2types.Tag {
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
func family(class *awsv1.EC2NodeClass) string { return userdata.FamilyOf(class) }

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
func (c *CloudProvider) launchTemplateConfigs(ctx context.Context, nc *v1.NodeClaim, class *awsv1.EC2NodeClass, capacityType string, candidates []candidate, subnets map[string]string) ([]ec2types.FleetLaunchTemplateConfigRequest, error) {
	fam := family(class)
	tags := c.poolTags(nc, class)
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
			RAID0:  class.Spec.InstanceStorePolicy != nil && *class.Spec.InstanceStorePolicy == awsv1.InstanceStorePolicyRAID0,
		})
		if err != nil {
			return nil, fmt.Errorf("rendering user data for EC2NodeClass %q, %w", class.Name, err)
		}
		devices := class.Spec.BlockDeviceMappings
		if len(devices) == 0 {
			devices = classtypes.DefaultBlockDevices(fam)
		}
		groups := make([]string, len(class.Status.SecurityGroups))
		for i, g := range class.Status.SecurityGroups {
			groups[i] = g.ID
		}
		for _, o := range cand.offerings {
			subnet, ok := subnets[o.Zone]
			if !ok {
				continue
			}
			// Each reservation has its own template, which targets it.
			lt := &LaunchTemplate{
				ClassName: class.Name, ImageID: image, UserData: ud, SecurityGroupIDs: groups,
				InstanceProfile: class.Status.InstanceProfile, BlockDeviceMappings: devices, MetadataOptions: class.Spec.MetadataOptions,
				DetailedMonitoring: aws.ToBool(class.Spec.DetailedMonitoring), AssociatePublicIP: class.Spec.AssociatePublicIPAddress,
				ConnectionTracking: class.Spec.ConnectionTracking, CPUOptions: class.Spec.CPUOptions, IPPrefixCount: class.Spec.IPPrefixCount,
				NetworkInterfaces: class.Spec.NetworkInterfaces,
				PlacementGroupID:  placementGroupID(class), PartitionNumber: partitionOf(nc, class),
				Enclaves: class.Spec.EnclaveOptions != nil && class.Spec.EnclaveOptions.Enabled,
				Tags:     tags, Spot: capacityType == v1.CapacityTypeSpot,
				CapacityReservationID: o.ReservationID,
				CapacityBlock:         o.ReservationID != "" && reservationType(class, o.ReservationID) == nodeclass.ReservationTypeCapacityBlock,
				Interruptible:         o.ReservationID != "" && interruptible(class, o.ReservationID),
			}
			name, err := c.templates.Ensure(ctx, lt)
			if err != nil {
				return nil, err
			}
			if o.ReservationID != "" {
				c.mu.Lock()
				c.reservedTemplates[name] = o.ReservationID
				c.mu.Unlock()
			}
			i, ok := index[name]
			if !ok {
				i = len(configs)
				index[name] = i
				configs = append(configs, ec2types.FleetLaunchTemplateConfigRequest{
					LaunchTemplateSpecification: &ec2types.FleetLaunchTemplateSpecificationRequest{LaunchTemplateName: aws.String(name), Version: aws.String("$Latest")},
				})
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

// placementGroupID is the class's resolved placement group, or "".
func placementGroupID(class *awsv1.EC2NodeClass) string {
	if pg := classtypes.PlacementGroup(class); pg != nil {
		return pg.ID
	}
	return ""
}

// partitionOf is the partition of a partition group the claim launches into, or
// 0: the lowest its requirements allow, or, when they allow any, one picked from
// its name, so that claims nothing pins spread over the partitions.
func partitionOf(nc *v1.NodeClaim, class *awsv1.EC2NodeClass) int32 {
	parts := classtypes.Partitions(classtypes.PlacementGroup(class))
	if len(parts) == 0 {
		return 0
	}
	for _, r := range nc.Spec.Requirements {
		if r.Key != v1.LabelPlacementGroupPartition {
			continue
		}
		req, err := scheduling.NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			break
		}
		var allowed []int32
		for i, p := range parts {
			if req.Has(p) {
				allowed = append(allowed, int32(i+1))
			}
		}
		if len(allowed) > 0 && len(allowed) < len(parts) {
			return allowed[0]
		}
	}
	h := fnv.New32a()
	h.Write([]byte(nc.Name))
	return int32(h.Sum32()%uint32(len(parts))) + 1
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

// zoneID is the ID of a zone the node class's subnets are in, "" when none is.
func zoneID(class *awsv1.EC2NodeClass, zone string) string {
	for _, s := range class.Status.Subnets {
		if s.Zone == zone && s.ZoneID != "" {
			return s.ZoneID
		}
	}
	return ""
}
