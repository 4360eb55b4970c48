package aws_test

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
)

// fakeEC2 is an in-memory EC2 for unit tests: it records the requests the provider
// makes, counts calls per action, and can be told to fail an action. CreateFleet
// honours ClientToken the way EC2 does (the same token returns the first answer).
type fakeEC2 struct {
	mu        sync.Mutex
	clock     *clocktesting.FakeClock
	zones     []string
	types     []ec2types.InstanceTypeInfo
	calls     map[string]int
	fail      map[string]error
	templates map[string]*ec2.CreateLaunchTemplateInput
	// createdTemplates are every CreateLaunchTemplate input, in order.
	createdTemplates []*ec2.CreateLaunchTemplateInput
	fleets           []*ec2.CreateFleetInput
	tokens           map[string]*ec2.CreateFleetOutput
	instances        []*ec2types.Instance
	// hide keeps instances out of DescribeInstances, as EC2's eventual consistency
	// does right after a launch.
	hide   bool
	nextID int
	// answerFailures answers that many fleets with an error inside a successful
	// response, as EC2 does while a new instance profile propagates.
	answerFailures int
}

func newFakeEC2(clk *clocktesting.FakeClock) *fakeEC2 {
	info := func(name string, cpu int32, mem int64, arch ec2types.ArchitectureType, enis, ips int32) ec2types.InstanceTypeInfo {
		return ec2types.InstanceTypeInfo{
			InstanceType:          ec2types.InstanceType(name),
			VCpuInfo:              &ec2types.VCpuInfo{DefaultVCpus: aws.Int32(cpu)},
			MemoryInfo:            &ec2types.MemoryInfo{SizeInMiB: aws.Int64(mem)},
			ProcessorInfo:         &ec2types.ProcessorInfo{SupportedArchitectures: []ec2types.ArchitectureType{arch}},
			NetworkInfo:           &ec2types.NetworkInfo{MaximumNetworkInterfaces: aws.Int32(enis), Ipv4AddressesPerInterface: aws.Int32(ips)},
			SupportedUsageClasses: []ec2types.UsageClassType{ec2types.UsageClassTypeOnDemand, ec2types.UsageClassTypeSpot},
			Hypervisor:            ec2types.InstanceTypeHypervisorNitro,
		}
	}
	return &fakeEC2{
		clock: clk,
		zones: []string{"us-west-2a", "us-west-2b"},
		types: []ec2types.InstanceTypeInfo{
			info("m5.large", 2, 8192, ec2types.ArchitectureTypeX8664, 3, 10),
			info("m5.xlarge", 4, 16384, ec2types.ArchitectureTypeX8664, 4, 15),
			info("c5.large", 2, 4096, ec2types.ArchitectureTypeX8664, 3, 10),
		},
		calls:     map[string]int{},
		fail:      map[string]error{},
		templates: map[string]*ec2.CreateLaunchTemplateInput{},
		tokens:    map[string]*ec2.CreateFleetOutput{},
	}
}

func apiError(code, msg string) error { return &smithy.GenericAPIError{Code: code, Message: msg} }

// call counts an action and returns the failure set for it, if any.
func (f *fakeEC2) call(action string) error {
	f.calls[action]++
	return f.fail[action]
}

func (f *fakeEC2) count(action string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[action]
}

func (f *fakeEC2) setFail(action string, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err == nil {
		delete(f.fail, action)
		return
	}
	f.fail[action] = err
}

func (f *fakeEC2) DescribeInstanceTypes(_ context.Context, _ *ec2.DescribeInstanceTypesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeInstanceTypes"); err != nil {
		return nil, err
	}
	return &ec2.DescribeInstanceTypesOutput{InstanceTypes: append([]ec2types.InstanceTypeInfo{}, f.types...)}, nil
}

func (f *fakeEC2) DescribeInstanceTypeOfferings(_ context.Context, _ *ec2.DescribeInstanceTypeOfferingsInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstanceTypeOfferingsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeInstanceTypeOfferings"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeInstanceTypeOfferingsOutput{}
	for _, t := range f.types {
		for _, z := range f.zones {
			out.InstanceTypeOfferings = append(out.InstanceTypeOfferings, ec2types.InstanceTypeOffering{InstanceType: t.InstanceType, Location: aws.String(z), LocationType: ec2types.LocationTypeAvailabilityZone})
		}
	}
	return out, nil
}

func (f *fakeEC2) DescribeSpotPriceHistory(_ context.Context, _ *ec2.DescribeSpotPriceHistoryInput, _ ...func(*ec2.Options)) (*ec2.DescribeSpotPriceHistoryOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &ec2.DescribeSpotPriceHistoryOutput{}, f.call("DescribeSpotPriceHistory")
}

func (f *fakeEC2) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateLaunchTemplate"); err != nil {
		return nil, err
	}
	name := aws.ToString(in.LaunchTemplateName)
	if _, ok := f.templates[name]; ok {
		return nil, apiError("InvalidLaunchTemplateName.AlreadyExistsException", "Launch template name already in use.")
	}
	f.templates[name] = in
	f.createdTemplates = append(f.createdTemplates, in)
	return &ec2.CreateLaunchTemplateOutput{LaunchTemplate: &ec2types.LaunchTemplate{LaunchTemplateName: in.LaunchTemplateName}}, nil
}

func (f *fakeEC2) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeLaunchTemplates"); err != nil {
		return nil, err
	}
	out := &ec2.DescribeLaunchTemplatesOutput{}
	names := in.LaunchTemplateNames
	if len(names) == 0 {
		for n := range f.templates {
			names = append(names, n)
		}
		sort.Strings(names)
	}
	for _, n := range names {
		t, ok := f.templates[n]
		if !ok {
			return nil, apiError("InvalidLaunchTemplateName.NotFoundException", "At least one of the launch templates specified in the request does not exist.")
		}
		out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{LaunchTemplateName: aws.String(n), Tags: t.TagSpecifications[0].Tags})
	}
	return out, nil
}

func (f *fakeEC2) DeleteLaunchTemplate(_ context.Context, in *ec2.DeleteLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DeleteLaunchTemplate"); err != nil {
		return nil, err
	}
	delete(f.templates, aws.ToString(in.LaunchTemplateName))
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

// deleteTemplates removes every template behind the provider's back, as another
// replica's sweep or a person would.
func (f *fakeEC2) deleteTemplates() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.templates = map[string]*ec2.CreateLaunchTemplateInput{}
}

func (f *fakeEC2) CreateFleet(_ context.Context, in *ec2.CreateFleetInput, _ ...func(*ec2.Options)) (*ec2.CreateFleetOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("CreateFleet"); err != nil {
		return nil, err
	}
	f.fleets = append(f.fleets, in)
	if token := aws.ToString(in.ClientToken); token != "" {
		if out, ok := f.tokens[token]; ok {
			return out, nil
		}
	}
	var out *ec2.CreateFleetOutput
	if f.answerFailures > 0 {
		f.answerFailures--
		out = &ec2.CreateFleetOutput{Errors: []ec2types.CreateFleetError{{ErrorCode: aws.String("InvalidParameterValue"),
			ErrorMessage: aws.String("Value (profile) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name")}}}
		if token := aws.ToString(in.ClientToken); token != "" {
			f.tokens[token] = out
		}
		return out, nil
	}
	for _, cfg := range in.LaunchTemplateConfigs {
		name := aws.ToString(cfg.LaunchTemplateSpecification.LaunchTemplateName)
		if _, ok := f.templates[name]; !ok {
			return nil, apiError("InvalidLaunchTemplateName.NotFoundException", fmt.Sprintf("The specified launch template, with template name %s, does not exist.", name))
		}
		if out != nil || len(cfg.Overrides) == 0 {
			continue
		}
		o := cfg.Overrides[0]
		f.nextID++
		id := fmt.Sprintf("i-%017d", f.nextID)
		lifecycle, instLifecycle := ec2types.InstanceLifecycleOnDemand, ec2types.InstanceLifecycleType("")
		if in.TargetCapacitySpecification.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot {
			lifecycle, instLifecycle = ec2types.InstanceLifecycleSpot, ec2types.InstanceLifecycleTypeSpot
		}
		inst := &ec2types.Instance{
			InstanceId: aws.String(id), InstanceType: o.InstanceType, ImageId: o.ImageId, SubnetId: o.SubnetId,
			Placement: &ec2types.Placement{AvailabilityZone: o.AvailabilityZone}, InstanceLifecycle: instLifecycle,
			State:      &ec2types.InstanceState{Name: ec2types.InstanceStateNamePending},
			LaunchTime: aws.Time(f.clock.Now()),
		}
		for _, ts := range in.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeInstance {
				inst.Tags = ts.Tags
			}
		}
		f.instances = append(f.instances, inst)
		out = &ec2.CreateFleetOutput{Instances: []ec2types.CreateFleetInstance{{
			InstanceIds: []string{id}, InstanceType: o.InstanceType, Lifecycle: lifecycle,
			LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
				InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId, ImageId: o.ImageId}},
		}}}
	}
	if out == nil {
		out = &ec2.CreateFleetOutput{}
	}
	if token := aws.ToString(in.ClientToken); token != "" {
		f.tokens[token] = out
	}
	return out, nil
}

// addInstances makes n running instances of the cluster directly, for tests that
// need many.
func (f *fakeEC2) addInstances(n int, image, subnet string) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for i := 0; i < n; i++ {
		f.nextID++
		id := fmt.Sprintf("i-%017d", f.nextID)
		f.instances = append(f.instances, &ec2types.Instance{
			InstanceId: aws.String(id), InstanceType: "m5.large", ImageId: aws.String(image), SubnetId: aws.String(subnet),
			Placement: &ec2types.Placement{AvailabilityZone: aws.String("us-west-2a")},
			State:     &ec2types.InstanceState{Name: ec2types.InstanceStateNameRunning},
			Tags: []ec2types.Tag{{Key: aws.String(dtaws.ClusterTag(fakeCluster)), Value: aws.String("owned")},
				{Key: aws.String(dtaws.TagNodePool), Value: aws.String("general")}, {Key: aws.String(dtaws.TagNodeClaim), Value: aws.String(id)}},
		})
		ids = append(ids, id)
	}
	return ids
}

func (f *fakeEC2) setState(id string, state ec2types.InstanceStateName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, inst := range f.instances {
		if aws.ToString(inst.InstanceId) == id {
			inst.State = &ec2types.InstanceState{Name: state}
		}
	}
}

func (f *fakeEC2) running() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, inst := range f.instances {
		if inst.State.Name != ec2types.InstanceStateNameTerminated {
			n++
		}
	}
	return n
}

// describePageSize is how many instances one DescribeInstances page holds.
const describePageSize = 100

func (f *fakeEC2) DescribeInstances(_ context.Context, in *ec2.DescribeInstancesInput, _ ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeInstances"); err != nil {
		return nil, err
	}
	var matched []ec2types.Instance
	if len(in.InstanceIds) > 0 {
		for _, id := range in.InstanceIds {
			found := false
			for _, inst := range f.instances {
				if aws.ToString(inst.InstanceId) == id {
					found = true
					if !f.hide && matches(inst, in.Filters) {
						matched = append(matched, *inst)
					}
				}
			}
			if !found || f.hide {
				return nil, apiError("InvalidInstanceID.NotFound", fmt.Sprintf("The instance ID '%s' does not exist", id))
			}
		}
	} else if !f.hide {
		for _, inst := range f.instances {
			if matches(inst, in.Filters) {
				matched = append(matched, *inst)
			}
		}
	}
	start := 0
	if in.NextToken != nil {
		start, _ = strconv.Atoi(*in.NextToken)
	}
	size := describePageSize
	if in.MaxResults != nil {
		size = int(*in.MaxResults)
	}
	out := &ec2.DescribeInstancesOutput{}
	end := min(start+size, len(matched))
	if start < end {
		out.Reservations = []ec2types.Reservation{{Instances: matched[start:end]}}
	}
	if end < len(matched) {
		out.NextToken = aws.String(strconv.Itoa(end))
	}
	return out, nil
}

func matches(inst *ec2types.Instance, filters []ec2types.Filter) bool {
	tags := map[string]string{}
	for _, t := range inst.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, flt := range filters {
		name := aws.ToString(flt.Name)
		ok := false
		for _, v := range flt.Values {
			switch {
			case name == "instance-id":
				ok = ok || aws.ToString(inst.InstanceId) == v
			case name == "instance-state-name":
				ok = ok || string(inst.State.Name) == v
			case name == "tag-key":
				_, has := tags[v]
				ok = ok || has
			case strings.HasPrefix(name, "tag:"):
				got, has := tags[strings.TrimPrefix(name, "tag:")]
				ok = ok || (has && got == v)
			default:
				panic("fakeEC2: unsupported filter " + name)
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

func (f *fakeEC2) RebootInstances(_ context.Context, in *ec2.RebootInstancesInput, _ ...func(*ec2.Options)) (*ec2.RebootInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("RebootInstances"); err != nil {
		return nil, err
	}
	for _, id := range in.InstanceIds {
		known := false
		for _, inst := range f.instances {
			known = known || aws.ToString(inst.InstanceId) == id
		}
		if !known {
			return nil, apiError("InvalidInstanceID.NotFound", "The instance ID '"+id+"' does not exist")
		}
	}
	return &ec2.RebootInstancesOutput{}, nil
}

func (f *fakeEC2) TerminateInstances(_ context.Context, in *ec2.TerminateInstancesInput, _ ...func(*ec2.Options)) (*ec2.TerminateInstancesOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("TerminateInstances"); err != nil {
		return nil, err
	}
	out := &ec2.TerminateInstancesOutput{}
	for _, id := range in.InstanceIds {
		for _, inst := range f.instances {
			if aws.ToString(inst.InstanceId) == id {
				previous := inst.State
				inst.State = &ec2types.InstanceState{Name: ec2types.InstanceStateNameTerminated}
				out.TerminatingInstances = append(out.TerminatingInstances, ec2types.InstanceStateChange{InstanceId: inst.InstanceId, PreviousState: previous, CurrentState: inst.State})
			}
		}
	}
	return out, nil
}

const fakeCluster = "unit"

// unitFixture is the provider on a fake EC2 and a fake API client holding a Ready
// EC2NodeClass "default".
type unitFixture struct {
	ctx   context.Context
	clock *clocktesting.FakeClock
	ec2   *fakeEC2
	kube  client.Client
	class *awsv1.EC2NodeClass
	cp    *dtaws.CloudProvider
}

func newUnitFixture(t *testing.T) *unitFixture {
	t.Helper()
	clk := clocktesting.NewFakeClock(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	api := newFakeEC2(clk)
	scheme := runtime.NewScheme()
	if err := awsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: "default", UID: "class-uid", Generation: 1},
		Spec:       awsv1.EC2NodeClassSpec{Role: "node-role", AMISelectorTerms: []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, Tags: map[string]string{"team": "billing"}},
		Status: awsv1.EC2NodeClassStatus{
			Subnets:         []awsv1.Subnet{{ID: "subnet-a", Zone: "us-west-2a"}, {ID: "subnet-b", Zone: "us-west-2b"}},
			SecurityGroups:  []awsv1.SecurityGroup{{ID: "sg-1"}},
			AMIs:            []awsv1.AMI{{ID: "ami-amd64", Requirements: []awsv1.AMIRequirement{{Key: v1.LabelArch, Operator: "In", Values: []string{v1.ArchitectureAmd64}}}}},
			InstanceProfile: "unit_profile",
		},
	}
	meta.SetStatusCondition(&class.Status.Conditions, metav1.Condition{Type: awsv1.ConditionTypeReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	kube := fake.NewClientBuilder().WithScheme(scheme).WithObjects(class).WithStatusSubresource(class).Build()
	prices := pricing.NewProvider(api, nil, "us-west-2", true, clk, logr.Discard())
	cp := dtaws.New(kube, api, dtaws.Settings{ClusterName: fakeCluster, Region: "us-west-2", ClusterEndpoint: "https://unit.example", ClusterCABundle: "Q0E="}, prices, clk)
	return &unitFixture{ctx: context.Background(), clock: clk, ec2: api, kube: kube, class: class, cp: cp}
}

func tagMap(tags []ec2types.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

// DescribeCapacityReservations knows no reservations.
func (f *fakeEC2) DescribeCapacityReservations(_ context.Context, _ *ec2.DescribeCapacityReservationsInput, _ ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.call("DescribeCapacityReservations"); err != nil {
		return nil, err
	}
	return &ec2.DescribeCapacityReservationsOutput{}, nil
}
