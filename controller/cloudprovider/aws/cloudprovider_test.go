package aws_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/smithy-go/middleware"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider"
	dtaws "github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/classtypes"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/launchtemplates"
	"github.com/dovetail-sh/dovetail/controller/controllers/ec2nodeclass/status"
	"github.com/dovetail-sh/dovetail/controller/controllers/nodeclaim/garbagecollection"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
	"github.com/dovetail-sh/dovetail/provider"
	"github.com/dovetail-sh/dovetail/tests/iampolicy"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

const (
	cluster = "moto"
	region  = "us-west-2"
)

// fixture is an API server and an emulated AWS with a Ready EC2NodeClass.
type fixture struct {
	ctx     context.Context
	kube    client.Client
	clients *dtaws.Clients
	seeded  *testenv.SeededAWS
	clock   *clocktesting.FakeClock
	prices  *pricing.Provider
	status  *status.Controller
	amis    *nodeclass.AMIResolver
	// iam records the provider's AWS calls, checked against the shipped IAM policy
	// when the test ends.
	iam *iampolicy.Recorder
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	if testing.Short() {
		t.Skip("starts kube-apiserver and moto_server")
	}
	api := testenv.StartAPIServer(t)
	clients := testenv.AWSClients(t, testenv.StartMoto(t), region)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	f := &fixture{ctx: ctx, kube: api.Client, clients: clients, clock: clocktesting.NewFakeClock(time.Now())}
	// The emulator stamps launch times with the wall clock; the fake one starts there.
	ctrllog.SetLogger(logr.Discard())
	f.seeded = testenv.SeedAWS(t, ctx, clients, cluster, "10.40", "us-west-2a", "us-west-2b")
	f.checkIAM(t)
	ec2API := ec2.New(clients.EC2.Options(), func(o *ec2.Options) { o.APIOptions = f.recorded(o.APIOptions) })
	amis := &nodeclass.AMIResolver{EC2: ec2API, SSM: ssm.New(clients.SSM.Options(), func(o *ssm.Options) { o.APIOptions = f.recorded(o.APIOptions) }),
		SSMPrefix: testenv.SSMPrefix, KubernetesVersion: testenv.KubernetesVersion}
	iamAPI := iam.New(clients.IAM.Options(), func(o *iam.Options) { o.APIOptions = f.recorded(o.APIOptions) })
	f.amis = amis
	f.status = status.NewController(api.Client, ec2API, amis, iamAPI, cluster, region, f.clock)
	f.prices = pricing.NewProvider(ec2API, nil, region, true, f.clock, logr.Discard())
	if err := f.prices.UpdateSpot(ctx); err != nil {
		t.Fatal(err)
	}
	return f
}

// class creates an EC2NodeClass selecting the seeded resources and resolves it.
func (f *fixture) class(t *testing.T, name string, mutate func(*awsv1.EC2NodeClassSpec)) *awsv1.EC2NodeClass {
	t.Helper()
	nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: awsv1.EC2NodeClassSpec{
		Role:                       f.seeded.Role,
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}},
		Tags:                       map[string]string{"team": "billing"},
	}}
	if mutate != nil {
		mutate(&nc.Spec)
	}
	if err := f.kube.Create(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	f.resolve(t, nc)
	return nc
}

func (f *fixture) resolve(t *testing.T, nc *awsv1.EC2NodeClass) {
	t.Helper()
	if _, err := f.status.Reconcile(f.ctx, nc); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
		t.Fatal(err)
	}
	if !meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady) {
		t.Fatalf("class %s is not Ready: %+v", nc.Name, nc.Status.Conditions)
	}
}

// checkIAM records the provider's AWS calls and, when the test ends, fails it on
// each one the IAM policy Dovetail ships would deny on AWS.
func (f *fixture) checkIAM(t *testing.T) {
	t.Helper()
	role, err := f.clients.IAM.GetRole(f.ctx, &iam.GetRoleInput{RoleName: aws.String(f.seeded.Role)})
	if err != nil {
		t.Fatal(err)
	}
	policy, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: region, AccountID: "123456789012", ClusterName: cluster, NodeRoleARN: aws.ToString(role.Role.Arn)})
	if err != nil {
		t.Fatal(err)
	}
	f.iam = iampolicy.NewRecorder(iampolicy.Options{AccountID: "123456789012",
		Lookup:              iampolicy.AWSLookup{EC2: f.clients.EC2, IAM: f.clients.IAM},
		SSMParameterAliases: map[string]string{testenv.SSMPrefix: nodeclass.DefaultSSMPrefix}})
	t.Cleanup(func() { iampolicy.Check(t, policy, f.iam) })
}

// recorded adds the IAM recorder to a client's API options, in a copy: clients made
// from one another's options must not share the slice.
func (f *fixture) recorded(opts []func(*middleware.Stack) error) []func(*middleware.Stack) error {
	return append(append([]func(*middleware.Stack) error{}, opts...), f.iam.APIOption)
}

// statusWith resolves classes with the EC2 options given (an emulator of what moto
// lacks) after the IAM recorder.
func (f *fixture) statusWith(opts ...func(*ec2.Options)) {
	opts = append([]func(*ec2.Options){func(o *ec2.Options) { o.APIOptions = f.recorded(o.APIOptions) }}, opts...)
	iamAPI := iam.New(f.clients.IAM.Options(), func(o *iam.Options) { o.APIOptions = f.recorded(o.APIOptions) })
	f.status = status.NewController(f.kube, ec2.New(f.clients.EC2.Options(), opts...), f.amis, iamAPI, cluster, region, f.clock)
}

func (f *fixture) provider(opts ...func(*ec2.Options)) *dtaws.CloudProvider {
	opts = append([]func(*ec2.Options){func(o *ec2.Options) { o.APIOptions = f.recorded(o.APIOptions) }}, opts...)
	api := ec2.New(f.clients.EC2.Options(), opts...)
	return dtaws.New(f.kube, api, dtaws.Settings{ClusterName: cluster, Region: region, ClusterEndpoint: "https://moto.example", ClusterCABundle: "Q0E=", VMMemoryOverheadPercent: 0.075}, f.prices, f.clock)
}

// countCalls counts the client's calls whose input is an In.
func countCalls[In any](n *atomic.Int32) func(*ec2.Options) {
	return func(o *ec2.Options) {
		o.APIOptions = append(o.APIOptions, func(stack *middleware.Stack) error {
			return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CountCalls", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
				if _, ok := in.Parameters.(In); ok {
					n.Add(1)
				}
				return next.HandleInitialize(ctx, in)
			}), middleware.After)
		})
	}
}

func claim(name, class string, reqs ...v1.NodeSelectorRequirementWithMinValues) *v1.NodeClaim {
	return &v1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{v1.LabelNodePool: "general", "team": "billing"}},
		Spec: v1.NodeClaimSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class},
			Requirements: reqs,
		},
	}
}

func req(key string, values ...string) v1.NodeSelectorRequirementWithMinValues {
	return v1.NodeSelectorRequirementWithMinValues{Key: key, RequirementBody: v1.RequirementBody{Operator: v1.OpIn, Values: values}}
}

func (f *fixture) instance(t *testing.T, providerID string) ec2types.Instance {
	t.Helper()
	id := providerID[strings.LastIndex(providerID, "/")+1:]
	out, err := f.clients.EC2.DescribeInstances(f.ctx, &ec2.DescribeInstancesInput{InstanceIds: []string{id}})
	if err != nil || len(out.Reservations) != 1 || len(out.Reservations[0].Instances) != 1 {
		t.Fatalf("describing %s: %v", id, err)
	}
	return out.Reservations[0].Instances[0]
}

func tagsOf(inst ec2types.Instance) map[string]string {
	out := map[string]string{}
	for _, t := range inst.Tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}

func (f *fixture) launchTemplates(t *testing.T) []ec2types.LaunchTemplate {
	t.Helper()
	out, err := f.clients.EC2.DescribeLaunchTemplates(f.ctx, &ec2.DescribeLaunchTemplatesInput{})
	if err != nil {
		t.Fatal(err)
	}
	return out.LaunchTemplates
}

// templateData is what the launch template's first version holds, and the class
// its tag names.
func (f *fixture) templateData(t *testing.T, lt ec2types.LaunchTemplate) (*ec2types.ResponseLaunchTemplateData, string) {
	t.Helper()
	versions, err := f.clients.EC2.DescribeLaunchTemplateVersions(f.ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId})
	if err != nil || len(versions.LaunchTemplateVersions) == 0 {
		t.Fatalf("reading launch template %s: %v", aws.ToString(lt.LaunchTemplateName), err)
	}
	class := ""
	for _, tag := range lt.Tags {
		if aws.ToString(tag.Key) == dtaws.TagNodeClass {
			class = aws.ToString(tag.Value)
		}
	}
	return versions.LaunchTemplateVersions[0].LaunchTemplateData, class
}

// onlyTemplateData is what the one launch template the test made holds.
func (f *fixture) onlyTemplateData(t *testing.T) *ec2types.ResponseLaunchTemplateData {
	t.Helper()
	lts := f.launchTemplates(t)
	if len(lts) != 1 {
		t.Fatalf("%d launch templates, want 1", len(lts))
	}
	data, _ := f.templateData(t, lts[0])
	return data
}

func TestInstanceTypes(t *testing.T) {
	f := newFixture(t)
	f.class(t, "default", nil)
	f.class(t, "dense", func(s *awsv1.EC2NodeClassSpec) {
		s.Kubelet = &awsv1.KubeletConfiguration{MaxPods: aws.Int32(20), SystemReserved: map[string]string{"memory": "1Gi"}}
	})
	cp := f.provider()
	pool := func(class string) *v1.NodePool {
		return &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}}}
	}
	types, err := cp.GetInstanceTypes(f.ctx, pool("default"))
	if err != nil {
		t.Fatal(err)
	}
	if len(types) < 300 {
		t.Fatalf("%d instance types from the emulator; want its whole catalog", len(types))
	}
	byName := map[string]int{}
	for i, it := range types {
		byName[it.Name] = i
	}
	m5 := types[byName["m5.large"]]
	for key, want := range map[string]string{v1.LabelInstanceFamily: "m5", v1.LabelInstanceCPU: "2", v1.LabelInstanceCategory: "m", v1.LabelInstanceGen: "5", v1.LabelArch: "amd64", v1.LabelInstanceMemory: "8192"} {
		if r := m5.Requirements.Get(key); !r.Has(want) || r.Len() != 1 {
			t.Errorf("m5.large %s = %v, want %s", key, r, want)
		}
	}
	if m5.Capacity.Pods != 29 {
		t.Errorf("m5.large max pods = %d, want 29 from its ENI limits", m5.Capacity.Pods)
	}
	zones := sets.New[string]()
	var spot, onDemand float64
	for _, o := range m5.Offerings {
		zones.Insert(o.Zone)
		if o.CapacityType == v1.CapacityTypeSpot {
			spot = o.Price
		} else {
			onDemand = o.Price
		}
	}
	if !zones.Equal(sets.New("us-west-2a", "us-west-2b")) {
		t.Errorf("m5.large zones = %v; want only the zones of the class's subnets", sets.List(zones))
	}
	if onDemand != 0.096 || spot <= 0 || spot >= onDemand {
		t.Errorf("m5.large prices: on-demand %v (want the table's 0.096), spot %v (want the spot history's, below on-demand)", onDemand, spot)
	}

	dense, err := cp.GetInstanceTypes(f.ctx, pool("dense"))
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range dense {
		if it.Name == "m5.large" {
			if it.Capacity.Pods != 20 {
				t.Errorf("kubelet maxPods 20: m5.large pods = %d", it.Capacity.Pods)
			}
			if diff := m5.Allocatable.Memory - it.Allocatable.Memory; diff <= 0 {
				t.Errorf("systemReserved memory 1Gi did not lower allocatable memory (diff %d)", diff)
			}
		}
	}

	if _, err := cp.GetInstanceTypes(f.ctx, pool("missing")); err == nil || !strings.Contains(err.Error(), `EC2NodeClass "missing"`) {
		t.Errorf("a missing class: err = %v", err)
	}
}

func TestLaunchTagTerminate(t *testing.T) {
	f := newFixture(t)
	class := f.class(t, "default", nil)
	cp := f.provider()

	small := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large", "m5.xlarge"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)}
	first, err := cp.Create(f.ctx, claim("first", "default", small...))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(first.Status.ProviderID, "aws:///us-west-2") || first.Labels[v1.LabelInstanceType] != "m5.large" || first.Labels[v1.LabelCapacityType] != v1.CapacityTypeOnDemand {
		t.Fatalf("launched %s as %s/%s; want the cheaper m5.large on-demand", first.Status.ProviderID, first.Labels[v1.LabelInstanceType], first.Labels[v1.LabelCapacityType])
	}
	if first.Annotations[awsv1.AnnotationEC2NodeClassHash] != class.Hash() || first.Status.ImageID != f.seeded.Images["x86_64"] {
		t.Errorf("hash annotation %q (want %q), image %q (want %q)", first.Annotations[awsv1.AnnotationEC2NodeClassHash], class.Hash(), first.Status.ImageID, f.seeded.Images["x86_64"])
	}
	if class.Status.InstanceProfile == "" || first.Annotations[awsv1.AnnotationInstanceProfile] != class.Status.InstanceProfile {
		t.Errorf("%s = %q, want the class's instance profile %q", awsv1.AnnotationInstanceProfile, first.Annotations[awsv1.AnnotationInstanceProfile], class.Status.InstanceProfile)
	}
	// The same claim launched again (its first result never recorded) is the same instance.
	again, err := cp.Create(f.ctx, claim("first", "default", small...))
	if err != nil {
		t.Fatal(err)
	}
	if again.Status.ProviderID != first.Status.ProviderID || again.Labels[v1.LabelInstanceType] != "m5.large" {
		t.Errorf("launching claim first again gave %s (%s); want its instance %s", again.Status.ProviderID, again.Labels[v1.LabelInstanceType], first.Status.ProviderID)
	}
	// RebootForRepair's call, checked against the shipped policy with the rest.
	if err := cp.Reboot(f.ctx, first, "uid-first-0-boot"); err != nil {
		t.Errorf("rebooting the instance: %v", err)
	}
	inst := f.instance(t, first.Status.ProviderID)
	tags := tagsOf(inst)
	for k, want := range map[string]string{"kubernetes.io/cluster/moto": "owned", dtaws.TagCluster: cluster, dtaws.TagNodePool: "general", dtaws.TagNodeClaim: "first", dtaws.TagName: "first", dtaws.TagNodeClass: "default", "team": "billing"} {
		if tags[k] != want {
			t.Errorf("instance tag %s = %q, want %q", k, tags[k], want)
		}
	}
	if subnet := aws.ToString(inst.SubnetId); subnet != f.seeded.Subnets[aws.ToString(inst.Placement.AvailabilityZone)] {
		t.Errorf("instance in subnet %s, not the class's subnet of its zone", subnet)
	}

	// m5.large and m5.xlarge hold different numbers of pods, which the kubelet is
	// told in user data: one template each.
	templates := f.launchTemplates(t)
	if len(templates) != 2 {
		t.Fatalf("%d launch templates; want one per pod limit of the two types", len(templates))
	}
	var data *ec2types.ResponseLaunchTemplateData
	var userData []string
	for _, lt := range templates {
		if !strings.HasPrefix(aws.ToString(lt.LaunchTemplateName), "dovetail/moto/") {
			t.Errorf("launch template %s is not named dovetail/<cluster>/<hash>", aws.ToString(lt.LaunchTemplateName))
		}
		versions, err := f.clients.EC2.DescribeLaunchTemplateVersions(f.ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId})
		if err != nil || len(versions.LaunchTemplateVersions) == 0 {
			t.Fatal(err)
		}
		data = versions.LaunchTemplateVersions[0].LaunchTemplateData
		ud, _ := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
		userData = append(userData, string(ud))
	}
	// karpenter_ec2nodeclasses_userdata_bytes is the size of the last rendering.
	if got := testutil.ToFloat64(dtaws.UserDataBytes.WithLabelValues(class.Name)); !slices.ContainsFunc(userData, func(ud string) bool { return float64(len(ud)) == got }) {
		t.Errorf("karpenter_ec2nodeclasses_userdata_bytes{nodeclass=%q} = %v; no template's user data is that long", class.Name, got)
	}
	all := strings.Join(userData, "\n")
	for _, want := range []string{"application/node.eks.aws", "name: moto", "apiServerEndpoint: https://moto.example", "maxPods: 29", "maxPods: 58", "karpenter.sh/unregistered", "team=billing"} {
		if !strings.Contains(all, want) {
			t.Errorf("user data lacks %q:\n%s", want, all)
		}
	}
	if aws.ToString(data.IamInstanceProfile.Name) != class.Status.InstanceProfile || data.MetadataOptions == nil || data.MetadataOptions.HttpTokens != ec2types.LaunchTemplateHttpTokensStateRequired {
		t.Errorf("template profile %v, metadata %+v; want the class's profile and IMDSv2 required", data.IamInstanceProfile, data.MetadataOptions)
	}

	second, err := cp.Create(f.ctx, claim("second", "default", small...))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.launchTemplates(t)); n != 2 {
		t.Errorf("%d launch templates after a second launch of the same shape; want the first ones reused", n)
	}
	// A fresh process finds the template by name rather than making another.
	third, err := f.provider().Create(f.ctx, claim("third", "default", small...))
	if err != nil {
		t.Fatal(err)
	}
	if n := len(f.launchTemplates(t)); n != 2 {
		t.Errorf("%d launch templates after a restart; want the existing ones found", n)
	}

	spot, err := cp.Create(f.ctx, claim("spot", "default", req(v1.LabelInstanceType, "m5.large", "c5.large"), req(v1.LabelCapacityType, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if spot.Labels[v1.LabelCapacityType] != v1.CapacityTypeSpot || f.instance(t, spot.Status.ProviderID).InstanceLifecycle != ec2types.InstanceLifecycleTypeSpot {
		t.Errorf("a claim allowing spot launched %s (lifecycle %s); want spot", spot.Labels[v1.LabelCapacityType], f.instance(t, spot.Status.ProviderID).InstanceLifecycle)
	}

	// What the shipped IAM policy requires on each resource a launch creates, where
	// the emulator keeps it: the fleet, the spot request, and the network-interface
	// tags the launch templates carry.
	fleets, err := f.clients.EC2.DescribeFleets(f.ctx, &ec2.DescribeFleetsInput{})
	if err != nil {
		t.Fatal(err)
	}
	if len(fleets.Fleets) != 4 {
		t.Errorf("%d fleets, want one per launch", len(fleets.Fleets))
	}
	for _, fl := range fleets.Fleets {
		checkTags(t, "fleet "+aws.ToString(fl.FleetId), fl.Tags, policyTags(cluster, "general"))
	}
	requests, err := f.clients.EC2.DescribeSpotInstanceRequests(f.ctx, &ec2.DescribeSpotInstanceRequestsInput{})
	if err != nil {
		t.Fatal(err)
	}
	spotID := f.instance(t, spot.Status.ProviderID).InstanceId
	found := false
	for _, r := range requests.SpotInstanceRequests {
		if aws.ToString(r.InstanceId) == aws.ToString(spotID) {
			found = true
			checkTags(t, "spot request "+aws.ToString(r.SpotInstanceRequestId), r.Tags, policyTags(cluster, "general"))
		}
	}
	if !found {
		t.Errorf("no spot request for the spot instance %s among %d", aws.ToString(spotID), len(requests.SpotInstanceRequests))
	}
	for _, lt := range f.launchTemplates(t) {
		versions, err := f.clients.EC2.DescribeLaunchTemplateVersions(f.ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId})
		if err != nil || len(versions.LaunchTemplateVersions) == 0 {
			t.Fatal(err)
		}
		var eni []ec2types.Tag
		for _, ts := range versions.LaunchTemplateVersions[0].LaunchTemplateData.TagSpecifications {
			if ts.ResourceType == ec2types.ResourceTypeNetworkInterface {
				eni = ts.Tags
			}
		}
		checkTags(t, "launch template "+aws.ToString(lt.LaunchTemplateName)+" network-interface", eni, policyTags(cluster, "general"))
	}

	got, err := cp.Get(f.ctx, first.Status.ProviderID)
	if err != nil || got.Name != "first" || got.Labels[v1.LabelInstanceType] != "m5.large" || got.Labels[v1.LabelNodePool] != "general" {
		t.Errorf("Get = %+v, %v", got, err)
	}
	listed, err := cp.List(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != 4 {
		t.Errorf("List = %d instances, want 4", len(listed))
	}

	// One listing of the cluster's instances answers the drift checks of them all.
	var describes atomic.Int32
	counted := f.provider(countCalls[*ec2.DescribeInstancesInput](&describes))
	// (The emulator gives spot instances its default security group, so spot is left out.)
	for _, nc := range []*v1.NodeClaim{first, second, third} {
		if reason, err := counted.IsDrifted(f.ctx, nc); err != nil || reason != "" {
			t.Errorf("a fresh instance drifted: %q, %v", reason, err)
		}
	}
	if n := describes.Load(); n != 1 {
		t.Errorf("drift checks of 3 instances made %d DescribeInstances calls, want 1", n)
	}
	patch := client.MergeFrom(class.DeepCopy())
	class.Spec.Tags["team"] = "payments"
	if err := f.kube.Patch(f.ctx, class, patch); err != nil {
		t.Fatal(err)
	}
	if reason, _ := cp.IsDrifted(f.ctx, first); reason != dtaws.DriftNodeClass {
		t.Errorf("after a tag change: drift %q, want %s", reason, dtaws.DriftNodeClass)
	}
	statusPatch := client.MergeFrom(class.DeepCopy())
	class.Status.AMIs = []awsv1.AMI{{ID: "ami-0000000000newer", Requirements: class.Status.AMIs[0].Requirements}}
	if err := f.kube.Status().Patch(f.ctx, class, statusPatch); err != nil {
		t.Fatal(err)
	}
	second.Annotations[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
	if reason, _ := cp.IsDrifted(f.ctx, second); reason != dtaws.DriftAMI {
		t.Errorf("after a new image: drift %q, want %s", reason, dtaws.DriftAMI)
	}

	if err := cp.Delete(f.ctx, first); err != nil {
		t.Fatal(err)
	}
	if state := f.instance(t, first.Status.ProviderID).State.Name; state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("after Delete the instance is %s", state)
	}
	if err := cp.Delete(f.ctx, first); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("a second Delete: %v; want NodeClaimNotFound", err)
	}
	if _, err := cp.Get(f.ctx, first.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get of a terminated instance: %v; want NodeClaimNotFound", err)
	}
}

// Claims deleted together (a disruption batch, an emptied pool) terminate in one
// TerminateInstances call, and an instance already shutting down is not asked
// again: the calls Karpenter's terminate batcher saves.
func TestTerminationsShareOneCall(t *testing.T) {
	f := newFixture(t)
	f.checkIAM(t)
	f.class(t, "default", nil)
	var terminations atomic.Int32
	cp := f.provider(countCalls[*ec2.TerminateInstancesInput](&terminations))
	reqs := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)}
	var claims []*v1.NodeClaim
	for i := range 6 {
		launched, err := cp.Create(f.ctx, claim(fmt.Sprintf("batch-%d", i), "default", reqs...))
		if err != nil {
			t.Fatal(err)
		}
		claims = append(claims, launched)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(claims))
	for i, nc := range claims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = cp.Delete(f.ctx, nc)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("deleting %s: %v", claims[i].Name, err)
		}
	}
	if n := terminations.Load(); n != 1 {
		t.Errorf("%d TerminateInstances calls for 6 claims deleted together; want 1", n)
	}
	for _, nc := range claims {
		if state := f.instance(t, nc.Status.ProviderID).State.Name; state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
			t.Errorf("%s: instance is %s after Delete", nc.Name, state)
		}
		if err := cp.Delete(f.ctx, nc); !cloudprovider.IsNodeClaimNotFound(err) {
			t.Errorf("deleting %s again: %v; want NodeClaimNotFound", nc.Name, err)
		}
	}
	if n := terminations.Load(); n != 1 {
		t.Errorf("%d TerminateInstances calls after deleting terminated instances again; want still 1", n)
	}
}

func TestInsufficientCapacityFallsBack(t *testing.T) {
	f := newFixture(t)
	f.class(t, "default", nil)
	refusedZone := "us-west-2a"
	cp := f.provider(testenv.RefuseCapacity(func(instanceType, zone string) bool {
		return instanceType == "m5.large" || (instanceType == "m5.xlarge" && zone == refusedZone)
	}))
	// failures sums the launch failures EC2's capacity refusals left, by zone.
	failures := func() map[string]float64 {
		ch := make(chan prometheus.Metric, 100)
		dtaws.InstanceLaunchFailures.Collect(ch)
		close(ch)
		out := map[string]float64{}
		for m := range ch {
			var pb dto.Metric
			if err := m.Write(&pb); err != nil {
				t.Fatal(err)
			}
			labels := map[string]string{}
			for _, l := range pb.Label {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["reason"] == "InsufficientInstanceCapacity" && labels["capacity_type"] == v1.CapacityTypeOnDemand {
				out[labels["zone"]] += pb.GetCounter().GetValue()
			}
		}
		return out
	}
	failedBefore := failures()
	launched, err := cp.Create(f.ctx, claim("fallback", "default", req(v1.LabelInstanceType, "m5.large", "m5.xlarge"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if launched.Labels[v1.LabelInstanceType] != "m5.xlarge" || launched.Labels[v1.LabelTopologyZone] != "us-west-2b" {
		t.Errorf("launched %s in %s; want m5.xlarge in us-west-2b, the only offering with capacity", launched.Labels[v1.LabelInstanceType], launched.Labels[v1.LabelTopologyZone])
	}
	// One failure per offering EC2 refused, labelled as Karpenter's are.
	if after := failures(); after[refusedZone] <= failedBefore[refusedZone] || after["us-west-2b"] <= failedBefore["us-west-2b"] {
		t.Errorf("karpenter_cloudprovider_instance_launch_failures_total did not count EC2's refusals in both zones: %v, before %v", after, failedBefore)
	}
	for _, zone := range []string{"us-west-2a", "us-west-2b"} {
		if !cp.Unavailable().IsUnavailable("m5.large", zone, v1.CapacityTypeOnDemand) {
			t.Errorf("m5.large in %s was refused but is not marked unavailable", zone)
		}
	}
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Kind: "EC2NodeClass", Name: "default"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m5.large" {
			continue
		}
		for _, o := range it.Offerings {
			if o.CapacityType == v1.CapacityTypeOnDemand && o.Available {
				t.Errorf("the engine still sees m5.large on-demand in %s as available", o.Zone)
			}
		}
	}

	_, err = cp.Create(f.ctx, claim("nothing", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("a claim only EC2-refused offerings satisfy: %v; want InsufficientCapacity", err)
	}
	f.clock.Step(dtaws.UnavailableTTL)
	if cp.Unavailable().IsUnavailable("m5.large", "us-west-2a", v1.CapacityTypeOnDemand) {
		t.Error("m5.large is still unavailable after the TTL")
	}

	// No class, no capacity; a class resolved and found wanting cannot launch until
	// it is fixed. Both end the claim (as Karpenter's errors of those kinds do), not
	// a retry until the launch times out.
	if _, err := cp.Create(f.ctx, claim("classless", "missing")); !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("a claim whose EC2NodeClass does not exist: %v; want InsufficientCapacity", err)
	}
	broken := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "no-subnets"}, Spec: awsv1.EC2NodeClassSpec{Role: f.seeded.Role,
		AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
		SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "no-such-cluster"}}},
		SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": cluster}}}}}
	if err := f.kube.Create(f.ctx, broken); err != nil {
		t.Fatal(err)
	}
	_, _ = f.status.Reconcile(f.ctx, broken)
	if _, err := cp.Create(f.ctx, claim("stuck", "no-subnets")); !cloudprovider.IsNodeClassNotReady(err) || !strings.Contains(err.Error(), "no-subnets") {
		t.Errorf("a claim whose EC2NodeClass selects no subnet: %v; want NodeClassNotReady naming the class", err)
	}
}

func TestGarbageCollection(t *testing.T) {
	f := newFixture(t)
	f.class(t, "default", nil)
	cp := f.provider()
	reqs := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)}

	// An instance whose NodeClaim never got written: a crash between launch and record.
	orphan, err := cp.Create(f.ctx, claim("orphan", "default", reqs...))
	if err != nil {
		t.Fatal(err)
	}
	// A NodeClaim whose instance someone terminated by hand.
	kept := claim("kept", "default", reqs...)
	gone := claim("gone", "default", reqs...)
	for _, nc := range []*v1.NodeClaim{kept, gone} {
		if err := f.kube.Create(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
		launched, err := cp.Create(f.ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		nc.Status.ProviderID = launched.Status.ProviderID
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched", LastTransitionTime: metav1.NewTime(f.clock.Now())})
		if err := f.kube.Status().Update(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	if err := cp.Delete(f.ctx, gone); err != nil {
		t.Fatal(err)
	}
	gc := garbagecollection.NewController(f.kube, cp, f.clock)
	if err := gc.Collect(f.ctx); err != nil {
		t.Fatal(err)
	}
	if state := f.instance(t, orphan.Status.ProviderID).State.Name; state != ec2types.InstanceStateNameRunning && state != ec2types.InstanceStateNamePending {
		t.Errorf("an instance within the grace period was collected (%s)", state)
	}
	f.clock.Step(garbagecollection.DefaultGrace + time.Minute)
	if err := gc.Collect(f.ctx); err != nil {
		t.Fatal(err)
	}
	if state := f.instance(t, orphan.Status.ProviderID).State.Name; state != ec2types.InstanceStateNameTerminated && state != ec2types.InstanceStateNameShuttingDown {
		t.Errorf("the orphaned instance is %s; want it terminated", state)
	}
	if state := f.instance(t, kept.Status.ProviderID).State.Name; state != ec2types.InstanceStateNameRunning && state != ec2types.InstanceStateNamePending {
		t.Errorf("an instance with a NodeClaim is %s; want it left alone", state)
	}
	if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(gone), gone); err == nil {
		t.Error("the NodeClaim whose instance is gone was not deleted")
	}
	if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(kept), kept); err != nil {
		t.Errorf("the NodeClaim with a live instance: %v", err)
	}

	// Launch templates: a class's go when it does; idle ones go after the idle time.
	other := f.class(t, "other", func(s *awsv1.EC2NodeClassSpec) { s.Tags = map[string]string{"team": "search"} })
	if _, err := cp.Create(f.ctx, claim("other", "other", reqs...)); err != nil {
		t.Fatal(err)
	}
	if n := len(f.launchTemplates(t)); n != 2 {
		t.Fatalf("%d launch templates, want one per class", n)
	}
	if err := f.kube.Delete(f.ctx, other); err != nil {
		t.Fatal(err)
	}
	sweeper := launchtemplates.NewController(f.kube, cp.LaunchTemplates(), f.clock)
	deleted, err := sweeper.Sweep(f.ctx)
	if err != nil {
		t.Fatal(err)
	}
	// The class's finalizer holds it, being deleted; its templates are fair game.
	if len(deleted) != 1 || len(f.launchTemplates(t)) != 1 {
		t.Errorf("swept %v, %d left; want the deleted class's one template gone", deleted, len(f.launchTemplates(t)))
	}
	f.clock.Step(launchtemplates.DefaultIdle)
	if deleted, err := sweeper.Sweep(f.ctx); err != nil || len(deleted) != 1 {
		t.Errorf("after an idle hour swept %v, %v; want the unused template gone", deleted, err)
	}
	if _, err := cp.Create(f.ctx, claim("again", "default", reqs...)); err != nil {
		t.Errorf("launching after the template was swept: %v", err)
	}

	// Templates deleted behind the provider's back are made again by the next launch.
	for _, lt := range f.launchTemplates(t) {
		if _, err := f.clients.EC2.DeleteLaunchTemplate(f.ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateId: lt.LaunchTemplateId}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cp.Create(f.ctx, claim("after-delete", "default", reqs...)); err != nil {
		t.Errorf("launching after the template was deleted by someone else: %v", err)
	}
	if n := len(f.launchTemplates(t)); n != 1 {
		t.Errorf("%d launch templates after the launch, want the deleted one made again", n)
	}
}

func TestEC2NodeClassFinalizerDeletesLaunchTemplates(t *testing.T) {
	f := newFixture(t)
	class := f.class(t, "default", nil)
	cp := f.provider()
	f.status.LaunchTemplates = cp.LaunchTemplates()
	if _, err := cp.Create(f.ctx, claim("a", "default", req(v1.LabelInstanceType, "m5.large"))); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Delete(f.ctx, class); err != nil {
		t.Fatal(err)
	}
	if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(class), class); err != nil {
		t.Fatal(err)
	}
	if _, err := f.status.Reconcile(f.ctx, class); err != nil {
		t.Fatal(err)
	}
	if n := len(f.launchTemplates(t)); n != 0 {
		t.Errorf("%d launch templates left after the class was deleted", n)
	}
	if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(class), class); err == nil {
		t.Errorf("class still present with finalizers %v", class.Finalizers)
	}
}

func reservation(id, instanceType, zone string, available int32, state ec2types.CapacityReservationState, tags map[string]string) ec2types.CapacityReservation {
	r := ec2types.CapacityReservation{CapacityReservationId: aws.String(id), InstanceType: aws.String(instanceType), AvailabilityZone: aws.String(zone),
		AvailableInstanceCount: aws.Int32(available), TotalInstanceCount: aws.Int32(available), State: state, OwnerId: aws.String("123456789012"),
		InstanceMatchCriteria: ec2types.InstanceMatchCriteriaTargeted, ReservationType: ec2types.CapacityReservationTypeDefault}
	for k, v := range tags {
		r.Tags = append(r.Tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	return r
}

// A class's capacity reservations are resolved into its status, offered to the engine
// as the cheapest capacity there is, and launched into (the launch template targets
// the reservation) until they are full; then claims that allow on-demand launch
// on-demand, and claims that allow only reserved capacity get none. Every call is
// checked against the shipped IAM policy.
func TestLaunchesIntoCapacityReservations(t *testing.T) {
	f := newFixture(t)
	const ml, other = "cr-0a1b2c3d4e5f60001", "cr-0a1b2c3d4e5f60002"
	emu := testenv.NewCapacityReservations(f.clients.EC2,
		reservation(ml, "m5.large", "us-west-2a", 2, ec2types.CapacityReservationStateActive, map[string]string{"team": "ml"}),
		reservation(other, "m5.xlarge", "us-west-2b", 1, ec2types.CapacityReservationStateActive, nil),
		reservation("cr-0a1b2c3d4e5f60003", "m5.large", "us-west-2b", 5, ec2types.CapacityReservationStateExpired, map[string]string{"team": "ml"}))
	f.statusWith(emu.Option)
	class := f.class(t, "reserved", func(s *awsv1.EC2NodeClassSpec) {
		s.CapacityReservationSelectorTerms = []awsv1.CapacityReservationSelectorTerm{{Tags: map[string]string{"team": "ml"}}, {ID: other}}
	})
	var ids []string
	for _, r := range class.Status.CapacityReservations {
		ids = append(ids, r.ID+" "+r.InstanceType+" "+r.AvailabilityZone+" "+r.ReservationType)
	}
	if got := strings.Join(ids, ", "); got != ml+" m5.large us-west-2a default, "+other+" m5.xlarge us-west-2b default" {
		t.Fatalf("status.capacityReservations = %s; want the two active ones the terms select", got)
	}
	if !meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeCapacityReservationsReady) || !meta.IsStatusConditionTrue(class.Status.Conditions, awsv1.ConditionTypeReady) {
		t.Fatalf("conditions %+v", class.Status.Conditions)
	}

	cp := f.provider(emu.Option)
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Kind: "EC2NodeClass", Name: "reserved"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name != "m5.large" {
			continue
		}
		var reserved, onDemand float64
		for _, o := range it.Offerings {
			switch {
			case o.CapacityType == v1.CapacityTypeReserved && o.Zone == "us-west-2a" && o.Available && o.ReservationID == ml:
				reserved = o.Price
			case o.CapacityType == v1.CapacityTypeReserved:
				t.Errorf("unexpected reserved offering %+v", o)
			case o.CapacityType == v1.CapacityTypeOnDemand:
				onDemand = o.Price
			}
		}
		if reserved <= 0 || reserved >= onDemand/1000 {
			t.Errorf("the reservation's offering costs %v against %v on-demand; want it found and far cheaper", reserved, onDemand)
		}
	}

	allowed := req(v1.LabelCapacityType, v1.CapacityTypeReserved, v1.CapacityTypeOnDemand)
	var reservedClaim *v1.NodeClaim
	for i := range 3 {
		launched, err := cp.Create(f.ctx, claim(fmt.Sprintf("r%d", i), "reserved", req(v1.LabelInstanceType, "m5.large"), allowed))
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			reservedClaim = launched
		}
		wantType, wantID := v1.CapacityTypeReserved, ml
		if i == 2 {
			// The reservation took two instances: the third claim launches on-demand.
			wantType, wantID = v1.CapacityTypeOnDemand, ""
		}
		if got := launched.Labels[v1.LabelCapacityType] + "/" + launched.Labels[v1.LabelCapacityReservationID]; got != wantType+"/"+wantID {
			t.Errorf("claim %d launched as %s; want %s/%s", i, got, wantType, wantID)
		}
		if i < 2 && (launched.Labels[v1.LabelTopologyZone] != "us-west-2a" || launched.Labels[v1.LabelCapacityReservationType] != "default") {
			t.Errorf("claim %d labels %v", i, launched.Labels)
		}
	}
	// The emulator counts a launch against the reservation only when its launch
	// template (read back from EC2) targets it.
	if n := emu.Launched(ml); n != 2 {
		t.Errorf("%d instances went into the reservation; want 2", n)
	}
	targets := map[string]int{}
	for _, lt := range f.launchTemplates(t) {
		versions, err := f.clients.EC2.DescribeLaunchTemplateVersions(f.ctx, &ec2.DescribeLaunchTemplateVersionsInput{LaunchTemplateId: lt.LaunchTemplateId, Versions: []string{"$Latest"}})
		if err != nil {
			t.Fatal(err)
		}
		target := ""
		if c := versions.LaunchTemplateVersions[0].LaunchTemplateData.CapacityReservationSpecification; c != nil && c.CapacityReservationTarget != nil {
			target = aws.ToString(c.CapacityReservationTarget.CapacityReservationId)
		}
		targets[target]++
	}
	if targets[ml] != 1 || targets[""] != 1 || len(targets) != 2 {
		t.Errorf("launch templates by the reservation they target: %v; want one for %s and one for no reservation", targets, ml)
	}
	// Another replica (a fresh provider) counts from EC2 and finds the reservation full.
	_, err = f.provider(emu.Option).Create(f.ctx, claim("only-reserved", "reserved", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeReserved)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("a claim only a full reservation satisfies: %v; want InsufficientCapacity", err)
	}
	// A node that leaves gives its place back at once (as Karpenter's MarkTerminated
	// does): a claim only the reservation satisfies launches into it without waiting
	// for the next count, which is what a node terminated first to free its place
	// (TerminateFirstDrift) is waiting for.
	for attempt := 0; ; attempt++ {
		err := cp.Delete(f.ctx, reservedClaim)
		if cloudprovider.IsNodeClaimNotFound(err) {
			break
		}
		if err != nil || attempt == 10 {
			t.Fatalf("deleting %s: %v after %d attempts", reservedClaim.Name, err, attempt+1)
		}
		f.clock.Step(time.Second)
	}
	// A repeated Delete of a gone instance gives no second place back.
	_ = cp.Delete(f.ctx, reservedClaim)
	refilled, err := cp.Create(f.ctx, claim("refill", "reserved", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeReserved)))
	if err != nil {
		t.Fatalf("a claim into the place a terminated node freed: %v", err)
	}
	if refilled.Labels[v1.LabelCapacityReservationID] != ml {
		t.Fatalf("a claim into the place a terminated node freed launched with labels %v", refilled.Labels)
	}
	if _, err := cp.Create(f.ctx, claim("one-too-many", "reserved", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeReserved))); !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("a second claim into the one place freed: %v; want InsufficientCapacity", err)
	}
	// The ReservedCapacity=false gate leaves reservations unused.
	off := dtaws.New(f.kube, ec2.New(f.clients.EC2.Options(), emu.Option), dtaws.Settings{ClusterName: cluster, Region: region, ClusterEndpoint: "https://moto.example",
		ClusterCABundle: "Q0E=", VMMemoryOverheadPercent: 0.075, DisableReservedCapacity: true}, f.prices, f.clock)
	types, err = off.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Kind: "EC2NodeClass", Name: "reserved"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		for _, o := range it.Offerings {
			if o.CapacityType == v1.CapacityTypeReserved {
				t.Fatalf("with ReservedCapacity off, %s still offers %+v", it.Name, o)
			}
		}
	}
}

// A node's ephemeral storage is what its kubelet root sits on, as Karpenter counts
// it: the striped instance store under RAID0, else the root volume's size.
func TestEphemeralStorageFollowsTheClass(t *testing.T) {
	f := newFixture(t)
	raid0 := awsv1.InstanceStorePolicyRAID0
	f.class(t, "default", nil)
	f.class(t, "big-root", func(s *awsv1.EC2NodeClassSpec) {
		size := resource.MustParse("100Gi")
		s.BlockDeviceMappings = []*awsv1.BlockDeviceMapping{
			{DeviceName: aws.String("/dev/xvda"), RootVolume: true, EBS: &awsv1.BlockDevice{VolumeSize: &size}},
		}
	})
	f.class(t, "raid0", func(s *awsv1.EC2NodeClassSpec) { s.InstanceStorePolicy = &raid0 })
	cp := f.provider()
	storage := func(class, instanceType string) string {
		t.Helper()
		types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name == instanceType {
				return resource.NewQuantity(it.Capacity.EphemeralStorage, resource.BinarySI).String()
			}
		}
		t.Fatalf("no %s for class %s", instanceType, class)
		return ""
	}
	nvme := ""
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "raid0"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, it := range types {
		if it.Name == "m5d.large" {
			nvme = it.Requirements.Get(v1.LabelInstanceLocalNVMe).Values()[0]
		}
	}
	if nvme == "" {
		t.Fatal("m5d.large has no instance-local-nvme label in the emulator's catalog")
	}
	gb, _ := strconv.ParseInt(nvme, 10, 64)
	for _, c := range []struct{ class, instanceType, want string }{
		{"default", "m5.large", "20Gi"},
		{"default", "m5d.large", "20Gi"},
		{"big-root", "m5.large", "100Gi"},
		{"raid0", "m5.large", "20Gi"},
		{"raid0", "m5d.large", resource.NewQuantity(gb*1000*1000*1000, resource.BinarySI).String()},
	} {
		if got := storage(c.class, c.instanceType); got != c.want {
			t.Errorf("class %s, %s: ephemeral storage %s, want %s", c.class, c.instanceType, got, c.want)
		}
	}
}

// In an account with no spot service-linked role that the controller may not
// create, every spot launch fails alike: a claim that allows on-demand launches
// on-demand and says why (naming the fix), spot stays out of plans for the TTL, and
// a spot-only claim fails with the fix in its error.
func TestSpotWithoutItsServiceLinkedRoleFallsBackToOnDemand(t *testing.T) {
	f := newFixture(t)
	f.class(t, "default", nil)
	cp := f.provider(testenv.NoSpotServiceLinkedRole())
	launched, err := cp.Create(f.ctx, claim("either", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeSpot, v1.CapacityTypeOnDemand)))
	if err != nil {
		t.Fatal(err)
	}
	if ct := launched.Labels[v1.LabelCapacityType]; ct != v1.CapacityTypeOnDemand {
		t.Errorf("launched %s; want on-demand", ct)
	}
	cond := meta.FindStatusCondition(launched.Status.Conditions, v1.ConditionTypeLaunched)
	if cond == nil || cond.Reason != "SpotUnavailable" || !strings.Contains(cond.Message, "aws iam create-service-linked-role --aws-service-name spot.amazonaws.com") {
		t.Errorf("Launched condition %+v; want SpotUnavailable naming the fix", cond)
	}
	for _, zone := range []string{"us-west-2a", "us-west-2b", "us-west-2c"} {
		if !cp.Unavailable().IsUnavailable("m5.xlarge", zone, v1.CapacityTypeSpot) {
			t.Errorf("spot in %s is still offered to plans", zone)
		}
	}
	_, err = cp.Create(f.ctx, claim("spot-only", "default", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeSpot)))
	if !cloudprovider.IsInsufficientCapacity(err) {
		t.Errorf("a spot-only claim: %v; want InsufficientCapacity", err)
	}
	f.clock.Step(dtaws.UnavailableTTL)
	if cp.Unavailable().IsUnavailable("m5.large", "us-west-2a", v1.CapacityTypeSpot) {
		t.Error("spot is still unavailable after the TTL")
	}
}

// TestConnectionTrackingInTheLaunchTemplate: a class's connectionTracking puts its
// idle timeouts on the primary network interface of the launch templates (which
// then carries the security groups), and nodes launch from them; a class without
// it keeps the groups on the template.
func TestConnectionTrackingInTheLaunchTemplate(t *testing.T) {
	f := newFixture(t)
	tcp, stream, udp := int32(3600), int32(120), int32(45)
	f.class(t, "tracked", func(s *awsv1.EC2NodeClassSpec) {
		s.ConnectionTracking = &awsv1.ConnectionTracking{TCPEstablishedTimeout: &tcp, UDPStreamTimeout: &stream, UDPTimeout: &udp}
	})
	plain := f.class(t, "default", nil)
	cp := f.provider()
	onDemand := []v1.NodeSelectorRequirementWithMinValues{req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand)}
	for _, c := range []string{"tracked", "default"} {
		launched, err := cp.Create(f.ctx, claim(c+"-node", c, onDemand...))
		if err != nil {
			t.Fatalf("launching from class %s: %v", c, err)
		}
		if launched.Status.ProviderID == "" {
			t.Fatalf("class %s: no instance", c)
		}
	}
	seen := map[string]bool{}
	for _, lt := range f.launchTemplates(t) {
		data, class := f.templateData(t, lt)
		seen[class] = true
		switch class {
		case "tracked":
			if len(data.NetworkInterfaces) != 1 || data.NetworkInterfaces[0].ConnectionTrackingSpecification == nil {
				t.Fatalf("launch template %s has network interfaces %+v; want one with connection tracking", aws.ToString(lt.LaunchTemplateName), data.NetworkInterfaces)
			}
			eni := data.NetworkInterfaces[0]
			ct := eni.ConnectionTrackingSpecification
			if aws.ToInt32(ct.TcpEstablishedTimeout) != tcp || aws.ToInt32(ct.UdpStreamTimeout) != stream || aws.ToInt32(ct.UdpTimeout) != udp || aws.ToInt32(eni.DeviceIndex) != 0 {
				t.Errorf("connection tracking %d/%d/%d on device %d; want %d/%d/%d on device 0", aws.ToInt32(ct.TcpEstablishedTimeout), aws.ToInt32(ct.UdpStreamTimeout), aws.ToInt32(ct.UdpTimeout), aws.ToInt32(eni.DeviceIndex), tcp, stream, udp)
			}
			if len(eni.Groups) != len(plain.Status.SecurityGroups) || len(data.SecurityGroupIds) != 0 {
				t.Errorf("the interface carries groups %v and the template %v; want the class's %d groups on the interface only", eni.Groups, data.SecurityGroupIds, len(plain.Status.SecurityGroups))
			}
		case "default":
			if len(data.NetworkInterfaces) != 0 || len(data.SecurityGroupIds) != len(plain.Status.SecurityGroups) {
				t.Errorf("a class without connectionTracking: interfaces %+v, groups %v", data.NetworkInterfaces, data.SecurityGroupIds)
			}
		}
	}
	if !seen["tracked"] || !seen["default"] {
		t.Errorf("launch templates of classes %v; want one of each", seen)
	}
}

// TestCPUOptionsNestedVirtualization: a class with cpuOptions.nestedVirtualization
// enabled offers only the types whose processors support it (EC2's
// DescribeInstanceTypes says which), and its launch templates turn it on; a class
// without cpuOptions offers every type and sets none.
func TestCPUOptionsNestedVirtualization(t *testing.T) {
	f := newFixture(t)
	enabled := awsv1.NestedVirtualizationEnabled
	f.class(t, "nested", func(s *awsv1.EC2NodeClassSpec) { s.CPUOptions = &awsv1.CPUOptions{NestedVirtualization: &enabled} })
	f.class(t, "default", nil)
	cp := f.provider()
	pool := func(class string) *v1.NodePool {
		return &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}}}
	}
	nested, err := cp.GetInstanceTypes(f.ctx, pool("nested"))
	if err != nil {
		t.Fatal(err)
	}
	all, err := cp.GetInstanceTypes(f.ctx, pool("default"))
	if err != nil {
		t.Fatal(err)
	}
	if len(nested) == 0 || len(nested) >= len(all) {
		t.Fatalf("%d types with nested virtualization of %d; want some, not all", len(nested), len(all))
	}
	for _, it := range nested {
		if family := it.Requirements.Get(v1.LabelInstanceFamily).Values(); len(family) != 1 || !strings.HasSuffix(strings.TrimSuffix(family[0], "-flex"), "8i") {
			t.Errorf("%s (family %v) offered with nested virtualization; the emulator's data has it on c8i, m8i and r8i only", it.Name, family)
		}
	}
	if _, err := cp.Create(f.ctx, claim("m5-node", "nested", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err == nil {
		t.Error("launched an m5.large, which has no nested virtualization, from the nested class")
	}
	for _, c := range []struct{ class, instanceType string }{{"nested", "m8i.large"}, {"default", "m5.large"}} {
		if _, err := cp.Create(f.ctx, claim(c.class+"-node", c.class, req(v1.LabelInstanceType, c.instanceType), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err != nil {
			t.Fatalf("launching %s from class %s: %v", c.instanceType, c.class, err)
		}
	}
	seen := map[string]bool{}
	for _, lt := range f.launchTemplates(t) {
		data, class := f.templateData(t, lt)
		cpu := data.CpuOptions
		seen[class] = true
		switch {
		case class == "nested" && (cpu == nil || cpu.NestedVirtualization != ec2types.NestedVirtualizationSpecificationEnabled):
			t.Errorf("launch template of class nested has cpu options %+v; want nested virtualization enabled", cpu)
		case class == "default" && cpu != nil && cpu.NestedVirtualization != "":
			t.Errorf("launch template of class default has cpu options %+v; want none", cpu)
		}
	}
	if !seen["nested"] || !seen["default"] {
		t.Errorf("launch templates of classes %v; want one of each", seen)
	}
}

// TestIPPrefixCountDelegatesPrefixes: a class with ipPrefixCount gives the primary
// interface that many IPv4 prefixes through the launch template, and its types'
// pod limit (in the engine's capacity and the kubelet's user data) is the
// prefix-delegation one: an m5.large's 29 ENI-limited pods become 110.
func TestIPPrefixCountDelegatesPrefixes(t *testing.T) {
	f := newFixture(t)
	prefixes := int32(2)
	f.class(t, "prefixed", func(s *awsv1.EC2NodeClassSpec) { s.IPPrefixCount = &prefixes })
	f.class(t, "default", nil)
	cp := f.provider()
	pool := func(class string) *v1.NodePool {
		return &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}}}
	}
	podsOf := func(class, instanceType string) int64 {
		types, err := cp.GetInstanceTypes(f.ctx, pool(class))
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range types {
			if it.Name == instanceType {
				return it.Capacity.Pods
			}
		}
		t.Fatalf("class %s offers no %s", class, instanceType)
		return 0
	}
	for _, c := range []struct {
		class, instanceType string
		want                int64
	}{{"default", "m5.large", 29}, {"prefixed", "m5.large", 110}, {"prefixed", "t3.nano", 34}, {"prefixed", "m5.8xlarge", 250}} {
		if got := podsOf(c.class, c.instanceType); got != c.want {
			t.Errorf("class %s, %s: %d pods, want %d", c.class, c.instanceType, got, c.want)
		}
	}
	if _, err := cp.Create(f.ctx, claim("prefixed-node", "prefixed", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err != nil {
		t.Fatal(err)
	}
	data := f.onlyTemplateData(t)
	if len(data.NetworkInterfaces) != 1 || aws.ToInt32(data.NetworkInterfaces[0].Ipv4PrefixCount) != prefixes || aws.ToInt32(data.NetworkInterfaces[0].DeviceIndex) != 0 {
		t.Fatalf("network interfaces %+v; want the primary one with %d IPv4 prefixes", data.NetworkInterfaces, prefixes)
	}
	userData, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(userData), "maxPods: 110") {
		t.Errorf("the kubelet is not told its 110 pods:\n%s", userData)
	}
}

// TestWindowsNodeClass: a class with alias windows2022@latest resolves the EKS
// Windows image (amd64 only) with its kubernetes.io/os and windows-build
// requirements; it offers only amd64 types, as Windows nodes of 110 pods with the
// primary interface's addresses as vpc.amazonaws.com/PrivateIPv4Address; a
// Windows pod's claim launches with PowerShell user data and a 50Gi /dev/sda1.
func TestWindowsNodeClass(t *testing.T) {
	f := newFixture(t)
	custom := `Write-Host "hello from the class"`
	win := f.class(t, "windows", func(s *awsv1.EC2NodeClassSpec) {
		s.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "windows2022@latest"}}
		s.UserData = &custom
	})
	if len(win.Status.AMIs) != 1 {
		t.Fatalf("amis %+v; want the one amd64 Windows image", win.Status.AMIs)
	}
	reqs := map[string][]string{}
	for _, r := range win.Status.AMIs[0].Requirements {
		reqs[r.Key] = r.Values
	}
	if fmt.Sprint(reqs[v1.LabelArch]) != "[amd64]" || fmt.Sprint(reqs[v1.LabelOS]) != "[windows]" || fmt.Sprint(reqs[v1.LabelWindowsBuild]) != "[10.0.20348]" {
		t.Errorf("image requirements %v", reqs)
	}
	cp := f.provider()
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "windows"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var m5 *scheduling.InstanceType
	for _, it := range types {
		if !it.Requirements.Get(v1.LabelArch).Has(v1.ArchitectureAmd64) || !it.Requirements.Get(v1.LabelOS).Has("windows") || it.Requirements.Get(v1.LabelOS).Has("linux") ||
			!it.Requirements.Get(v1.LabelWindowsBuild).Has("10.0.20348") {
			t.Fatalf("%s offered to a Windows class with requirements %v", it.Name, it.Requirements)
		}
		if it.Name == "m5.large" {
			m5 = it
		}
	}
	if m5 == nil || m5.Capacity.Pods != 110 || m5.Capacity.Extended[classtypes.PrivateIPv4Address] != 9 {
		t.Fatalf("m5.large as a Windows node: %+v; want 110 pods and 9 PrivateIPv4Address (10 addresses a interface, less the primary)", m5)
	}
	launched, err := cp.Create(f.ctx, claim("win-node", "windows", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand),
		req(v1.LabelOS, "windows")))
	if err != nil {
		t.Fatal(err)
	}
	if launched.Labels[v1.LabelOS] != "windows" || launched.Labels[v1.LabelWindowsBuild] != "10.0.20348" {
		t.Errorf("launched claim labels %v", launched.Labels)
	}
	data := f.onlyTemplateData(t)
	userData, err := base64.StdEncoding.DecodeString(aws.ToString(data.UserData))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"<powershell>\n" + custom + "\n", "& $EKSBootstrapScriptFile -EKSClusterName '" + cluster + "'", "--max-pods=110", "</powershell>"} {
		if !strings.Contains(string(userData), want) {
			t.Errorf("user data lacks %q:\n%s", want, userData)
		}
	}
	if len(data.BlockDeviceMappings) != 1 || aws.ToString(data.BlockDeviceMappings[0].DeviceName) != "/dev/sda1" || aws.ToInt32(data.BlockDeviceMappings[0].Ebs.VolumeSize) != 50 {
		t.Errorf("block devices %+v; want a 50Gi /dev/sda1", data.BlockDeviceMappings)
	}
}

// TestNetworkInterfacesEFALayout: a class with networkInterfaces (a primary ENA
// interface and an EFA-only one on card 0) offers only the types that take the
// layout; their pod limit drops by the EFA-only interface (c5n.18xlarge: 15
// interfaces of 50 addresses, 737 pods, 688 with one of them EFA-only) and their
// EFA devices are the layout's; the launch template carries the layout, the
// groups on each interface and the public address on the ENA one only.
func TestNetworkInterfacesEFALayout(t *testing.T) {
	f := newFixture(t)
	public := false
	f.class(t, "efa", func(s *awsv1.EC2NodeClassSpec) {
		s.AssociatePublicIPAddress = &public
		s.NetworkInterfaces = []*awsv1.NetworkInterface{
			{NetworkCardIndex: 0, DeviceIndex: 0, InterfaceType: awsv1.InterfaceTypeInterface},
			{NetworkCardIndex: 0, DeviceIndex: 1, InterfaceType: awsv1.InterfaceTypeEFAOnly},
		}
	})
	cp := f.provider()
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "efa"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	var c5n *scheduling.InstanceType
	for _, it := range types {
		if it.Capacity.Extended[dtaws.ResourceEFA] != 1 {
			t.Fatalf("%s offered to the EFA layout with %d EFA devices; want the layout's 1", it.Name, it.Capacity.Extended[dtaws.ResourceEFA])
		}
		if it.Name == "c5n.18xlarge" {
			c5n = it
		}
		if it.Name == "m5.large" {
			t.Error("m5.large, which has no EFA, is offered to an EFA layout")
		}
	}
	if c5n == nil || c5n.Capacity.Pods != 688 {
		t.Fatalf("c5n.18xlarge: %+v; want 688 pods", c5n)
	}
	if _, err := cp.Create(f.ctx, claim("efa-node", "efa", req(v1.LabelInstanceType, "c5n.18xlarge"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err != nil {
		t.Fatal(err)
	}
	nis := f.onlyTemplateData(t).NetworkInterfaces
	if len(nis) != 2 {
		t.Fatalf("launch template interfaces %+v; want the layout's two", nis)
	}
	for _, ni := range nis {
		efaOnly := aws.ToString(ni.InterfaceType) == awsv1.InterfaceTypeEFAOnly
		if len(ni.Groups) == 0 || aws.ToInt32(ni.NetworkCardIndex) != 0 || aws.ToInt32(ni.DeviceIndex) != map[bool]int32{false: 0, true: 1}[efaOnly] ||
			(ni.AssociatePublicIpAddress != nil) == efaOnly {
			t.Errorf("interface %+v (type %s): want the groups, its place, and a public-address setting only on the ENA one", ni, aws.ToString(ni.InterfaceType))
		}
	}
}

// TestPlacementGroup: placementGroupSelector resolves an available group
// (DescribePlacementGroups, emulated: moto has none) into the class's status; a
// cluster group offers only the types that support it (not t3.micro); a partition
// group labels its types with the group and its partitions, and a claim that asks
// for partition 2 launches with the group and partition in its launch template
// and carries both labels; a claim whose group label is not the group's is
// drifted; a selector naming no available group leaves the class not Ready.
func TestPlacementGroup(t *testing.T) {
	f := newFixture(t)
	groups := &testenv.PlacementGroups{Groups: []ec2types.PlacementGroup{
		{GroupId: aws.String("pg-0hpc"), GroupName: aws.String("hpc"), Strategy: ec2types.PlacementStrategyPartition, PartitionCount: aws.Int32(3), State: ec2types.PlacementGroupStateAvailable},
		{GroupId: aws.String("pg-0ring"), GroupName: aws.String("ring"), Strategy: ec2types.PlacementStrategyCluster, State: ec2types.PlacementGroupStateAvailable},
		{GroupId: aws.String("pg-0old"), GroupName: aws.String("old"), Strategy: ec2types.PlacementStrategySpread, State: ec2types.PlacementGroupStateDeleted},
	}}
	f.statusWith(groups.Option)
	part := f.class(t, "part", func(s *awsv1.EC2NodeClassSpec) {
		s.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String("hpc")}
	})
	if pg := part.Status.PlacementGroup; pg == nil || pg.ID != "pg-0hpc" || pg.Strategy != "partition" || pg.PartitionCount != 3 {
		t.Fatalf("status.placementGroup %+v", pg)
	}
	if !meta.IsStatusConditionTrue(part.Status.Conditions, awsv1.ConditionTypePlacementGroupReady) {
		t.Errorf("PlacementGroupReady is not True: %+v", part.Status.Conditions)
	}
	f.class(t, "ring", func(s *awsv1.EC2NodeClassSpec) {
		s.PlacementGroupSelector = &awsv1.PlacementGroupSelector{ID: aws.String("pg-0ring")}
	})
	cp := f.provider()
	typesOf := func(class string) map[string]*scheduling.InstanceType {
		types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
			NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: class}}}}})
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]*scheduling.InstanceType{}
		for _, it := range types {
			out[it.Name] = it
		}
		return out
	}
	if ring := typesOf("ring"); ring["t3.micro"] != nil || ring["m5.large"] == nil || !ring["m5.large"].Requirements.Get(v1.LabelPlacementGroupID).Has("pg-0ring") {
		t.Errorf("cluster group: t3.micro offered %v, m5.large %v; want only types that support cluster, labelled with the group", ring["t3.micro"] != nil, ring["m5.large"])
	}
	m5 := typesOf("part")["m5.large"]
	if m5 == nil || fmt.Sprint(m5.Requirements.Get(v1.LabelPlacementGroupPartition).Values()) != "[1 2 3]" {
		t.Fatalf("partition group: m5.large %v; want partitions 1 to 3", m5)
	}
	launched, err := cp.Create(f.ctx, claim("part-node", "part", req(v1.LabelInstanceType, "m5.large"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand),
		req(v1.LabelPlacementGroupPartition, "2")))
	if err != nil {
		t.Fatal(err)
	}
	if launched.Labels[v1.LabelPlacementGroupID] != "pg-0hpc" || launched.Labels[v1.LabelPlacementGroupPartition] != "2" {
		t.Errorf("claim labels %v; want the group and partition 2", launched.Labels)
	}
	if p := f.onlyTemplateData(t).Placement; p == nil || aws.ToString(p.GroupId) != "pg-0hpc" || aws.ToInt32(p.PartitionNumber) != 2 {
		t.Errorf("launch template placement %+v; want group pg-0hpc, partition 2", p)
	}
	if reason, err := cp.IsDrifted(f.ctx, launched); err != nil || reason != "" {
		t.Errorf("a claim just launched into the group is drifted: %q %v", reason, err)
	}
	moved := launched.DeepCopy()
	moved.Labels[v1.LabelPlacementGroupID] = "pg-0before"
	if reason, _ := cp.IsDrifted(f.ctx, moved); reason != dtaws.DriftPlacementGroup {
		t.Errorf("a claim of another group: drift %q, want %s", reason, dtaws.DriftPlacementGroup)
	}

	for _, name := range []string{"old", "nope"} {
		nc := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "gone-" + name}, Spec: *part.Spec.DeepCopy()}
		nc.Spec.PlacementGroupSelector = &awsv1.PlacementGroupSelector{Name: aws.String(name)}
		if err := f.kube.Create(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
		if _, err := f.status.Reconcile(f.ctx, nc); err != nil {
			t.Fatal(err)
		}
		if err := f.kube.Get(f.ctx, client.ObjectKeyFromObject(nc), nc); err != nil {
			t.Fatal(err)
		}
		cond := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypePlacementGroupReady)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != "PlacementGroupNotFound" || meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady) {
			t.Errorf("a selector naming %q: PlacementGroupReady %+v, Ready %v", name, cond, meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady))
		}
	}
}

// TestEnclaveOptions: enclaveOptions.enabled (Karpenter v1.15) offers only the
// types EC2 says support Nitro Enclaves (m5.2xlarge, not m5.large), and turns them
// on in the launch template.
func TestEnclaveOptions(t *testing.T) {
	f := newFixture(t)
	f.class(t, "enclaves", func(s *awsv1.EC2NodeClassSpec) { s.EnclaveOptions = &awsv1.EnclaveOptions{Enabled: true} })
	cp := f.provider()
	types, err := cp.GetInstanceTypes(f.ctx, &v1.NodePool{Spec: v1.NodePoolSpec{Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
		NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "enclaves"}}}}})
	if err != nil {
		t.Fatal(err)
	}
	offered := map[string]bool{}
	for _, it := range types {
		offered[it.Name] = true
	}
	if offered["m5.large"] || !offered["m5.2xlarge"] {
		t.Errorf("m5.large offered %v, m5.2xlarge %v; want only types with Nitro Enclaves", offered["m5.large"], offered["m5.2xlarge"])
	}
	if _, err := cp.Create(f.ctx, claim("enclave-node", "enclaves", req(v1.LabelInstanceType, "m5.2xlarge"), req(v1.LabelCapacityType, v1.CapacityTypeOnDemand))); err != nil {
		t.Fatal(err)
	}
	if e := f.onlyTemplateData(t).EnclaveOptions; e == nil || !aws.ToBool(e.Enabled) {
		t.Errorf("launch template enclave options %+v; want enabled", e)
	}
}
