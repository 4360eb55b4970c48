package aws

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/log"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/awserr"
)

// Tags the provider puts on what it creates, as Karpenter names them, so tools
// written for Karpenter find Dovetail's instances too.
const (
	TagCluster       = "karpenter.k8s.aws/cluster"
	TagNodeClass     = "karpenter.k8s.aws/ec2nodeclass"
	TagNodePool      = "karpenter.sh/nodepool"
	TagNodeClaim     = "karpenter.sh/nodeclaim"
	TagEKSCluster    = "eks:eks-cluster-name"
	TagName          = "Name"
	launchTemplateNS = "dovetail"
)

// ClusterTag is the kubernetes.io/cluster/<name> tag every instance carries.
func ClusterTag(cluster string) string { return "kubernetes.io/cluster/" + cluster }

// LaunchTemplateAPI is the part of EC2 launch templates use.
type LaunchTemplateAPI interface {
	CreateLaunchTemplate(context.Context, *ec2.CreateLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error)
	DescribeLaunchTemplates(context.Context, *ec2.DescribeLaunchTemplatesInput, ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error)
	DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error)
}

// LaunchTemplate is everything a launch template holds; equal values share one.
type LaunchTemplate struct {
	ClassName           string                      `json:"class"`
	ImageID             string                      `json:"imageID"`
	UserData            string                      `json:"userData"`
	SecurityGroupIDs    []string                    `json:"securityGroupIDs"`
	InstanceProfile     string                      `json:"instanceProfile"`
	BlockDeviceMappings []*awsv1.BlockDeviceMapping `json:"blockDeviceMappings,omitempty"`
	MetadataOptions     *awsv1.MetadataOptions      `json:"metadataOptions,omitempty"`
	DetailedMonitoring  bool                        `json:"detailedMonitoring,omitempty"`
	AssociatePublicIP   *bool                       `json:"associatePublicIP,omitempty"`
	// ConnectionTracking sets the primary interface's idle connection tracking
	// timeouts.
	ConnectionTracking *awsv1.ConnectionTracking `json:"connectionTracking,omitempty"`
	// IPPrefixCount is how many IPv4 prefixes (/28) the primary interface gets.
	IPPrefixCount *int32 `json:"ipPrefixCount,omitempty"`
	// NetworkInterfaces lay out the instance's interfaces (EFA setups); empty, one
	// primary interface.
	NetworkInterfaces []*awsv1.NetworkInterface `json:"networkInterfaces,omitempty"`
	// PlacementGroupID and PartitionNumber place the instances in the class's
	// placement group (and partition).
	PlacementGroupID string `json:"placementGroupID,omitempty"`
	PartitionNumber  int32  `json:"partitionNumber,omitempty"`
	// Enclaves turns AWS Nitro Enclaves on.
	Enclaves bool `json:"enclaves,omitempty"`
	// CPUOptions turn nested virtualization on or off.
	CPUOptions *awsv1.CPUOptions `json:"cpuOptions,omitempty"`
	// Tags go on the template and, through it, on the network interface and spot
	// request of each instance; they name the pool, so each pool has its own templates.
	Tags map[string]string `json:"tags,omitempty"`
	// Spot templates also tag the spot request; EC2 refuses that tag on on-demand launches.
	Spot bool `json:"spot,omitempty"`
	// CapacityReservationID targets the template's instances at one reservation; a
	// capacity block also needs its market type.
	CapacityReservationID string `json:"capacityReservationID,omitempty"`
	CapacityBlock         bool   `json:"capacityBlock,omitempty"`
	// Interruptible reservations are their own market too.
	Interruptible bool `json:"interruptible,omitempty"`
}

// Name is the template's name: the cluster and a hash of its contents.
func (t *LaunchTemplate) Name(cluster string) string {
	b, _ := json.Marshal(t)
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%s/%s/%s", launchTemplateNS, cluster, hex.EncodeToString(sum[:8]))
}

// LaunchTemplates creates launch templates on demand and remembers them.
type LaunchTemplates struct {
	ec2     LaunchTemplateAPI
	cluster string
	clock   clock.Clock
	started time.Time
	mu      sync.Mutex
	known   map[string]bool
	used    map[string]time.Time
	// ensuring makes the launches of a burst that need the same new template
	// share one describe and create, instead of each racing to make it.
	ensuring singleflight.Group
}

// NewLaunchTemplates builds the provider.
func NewLaunchTemplates(api LaunchTemplateAPI, cluster string, clk clock.Clock) *LaunchTemplates {
	return &LaunchTemplates{ec2: api, cluster: cluster, clock: clk, started: clk.Now(), known: map[string]bool{}, used: map[string]time.Time{}}
}

// Ensure returns the name of a template with t's contents, creating it if needed.
func (l *LaunchTemplates) Ensure(ctx context.Context, t *LaunchTemplate) (string, error) {
	name := t.Name(l.cluster)
	l.mu.Lock()
	known := l.known[name]
	l.used[name] = l.clock.Now()
	l.mu.Unlock()
	if known {
		return name, nil
	}
	_, err, _ := l.ensuring.Do(name, func() (any, error) {
		l.mu.Lock()
		known := l.known[name]
		l.mu.Unlock()
		if known {
			// Made by a flight that ended since this caller looked.
			return nil, nil
		}
		// The flight answers every caller that joined it: one caller giving up
		// must not fail the others.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), batchTimeout)
		defer cancel()
		out, err := l.ec2.DescribeLaunchTemplates(ctx, &ec2.DescribeLaunchTemplatesInput{LaunchTemplateNames: []string{name}})
		switch {
		case err == nil && len(out.LaunchTemplates) > 0:
		case err == nil || isCode(err, "InvalidLaunchTemplateName.NotFoundException"):
			if err := l.create(ctx, name, t); err != nil && !isCode(err, "InvalidLaunchTemplateName.AlreadyExistsException") {
				return nil, fmt.Errorf("creating launch template %s, %w", name, err)
			}
		default:
			return nil, fmt.Errorf("describing launch template %s, %w", name, err)
		}
		l.mu.Lock()
		l.known[name] = true
		l.mu.Unlock()
		return nil, nil
	})
	if err != nil {
		return "", err
	}
	return name, nil
}

func (l *LaunchTemplates) create(ctx context.Context, name string, t *LaunchTemplate) error {
	tags := []ec2types.Tag{
		{Key: aws.String(TagCluster), Value: aws.String(l.cluster)},
		{Key: aws.String(TagNodeClass), Value: aws.String(t.ClassName)},
	}
	for _, k := range sortedKeys(t.Tags) {
		if k != TagCluster && k != TagNodeClass {
			tags = append(tags, ec2types.Tag{Key: aws.String(k), Value: aws.String(t.Tags[k])})
		}
	}
	data := &ec2types.RequestLaunchTemplateData{
		ImageId:             aws.String(t.ImageID),
		IamInstanceProfile:  &ec2types.LaunchTemplateIamInstanceProfileSpecificationRequest{Name: aws.String(t.InstanceProfile)},
		BlockDeviceMappings: blockDevices(t.BlockDeviceMappings),
		MetadataOptions:     metadataOptions(t.MetadataOptions),
		Monitoring:          &ec2types.LaunchTemplatesMonitoringRequest{Enabled: aws.Bool(t.DetailedMonitoring)},
	}
	if t.Enclaves {
		data.EnclaveOptions = &ec2types.LaunchTemplateEnclaveOptionsRequest{Enabled: aws.Bool(true)}
	}
	if t.PlacementGroupID != "" {
		data.Placement = &ec2types.LaunchTemplatePlacementRequest{GroupId: aws.String(t.PlacementGroupID)}
		if t.PartitionNumber > 0 {
			data.Placement.PartitionNumber = aws.Int32(t.PartitionNumber)
		}
	}
	if o := t.CPUOptions; o != nil && o.NestedVirtualization != nil {
		data.CpuOptions = &ec2types.LaunchTemplateCpuOptionsRequest{NestedVirtualization: ec2types.NestedVirtualizationSpecification(*o.NestedVirtualization)}
	}
	if t.CapacityReservationID != "" {
		data.CapacityReservationSpecification = &ec2types.LaunchTemplateCapacityReservationSpecificationRequest{
			CapacityReservationTarget: &ec2types.CapacityReservationTarget{CapacityReservationId: aws.String(t.CapacityReservationID)}}
		switch {
		case t.CapacityBlock:
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeCapacityBlock}
		case t.Interruptible:
			data.InstanceMarketOptions = &ec2types.LaunchTemplateInstanceMarketOptionsRequest{MarketType: ec2types.MarketTypeInterruptibleCapacityReservation}
		}
	}
	instanceTags := ec2Tags(t.Tags)
	data.TagSpecifications = []ec2types.LaunchTemplateTagSpecificationRequest{{ResourceType: ec2types.ResourceTypeNetworkInterface, Tags: instanceTags}}
	if t.Spot {
		data.TagSpecifications = append(data.TagSpecifications, ec2types.LaunchTemplateTagSpecificationRequest{ResourceType: ec2types.ResourceTypeSpotInstancesRequest, Tags: instanceTags})
	}
	if t.UserData != "" {
		data.UserData = aws.String(base64.StdEncoding.EncodeToString([]byte(t.UserData)))
	}
	// Measured before the call, so a rendering EC2 refuses as too large is seen.
	UserDataBytes.WithLabelValues(t.ClassName).Set(float64(len(t.UserData)))
	if len(t.UserData) >= userDataWarnBytes {
		log.FromContext(ctx).Info("rendered user data is approaching the EC2 user data size limit", "nodeclass", t.ClassName, "userdata-bytes", len(t.UserData), "limit", 16384)
	}
	if len(t.NetworkInterfaces) > 0 {
		// Every interface carries the groups; the primary interface's settings go on
		// every ENA interface, none on an EFA-only one (EC2 refuses them there).
		for _, ni := range t.NetworkInterfaces {
			spec := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
				NetworkCardIndex: aws.Int32(ni.NetworkCardIndex), DeviceIndex: aws.Int32(ni.DeviceIndex),
				InterfaceType: aws.String(ni.InterfaceType), Groups: t.SecurityGroupIDs,
			}
			if ni.InterfaceType != awsv1.InterfaceTypeEFAOnly {
				spec.AssociatePublicIpAddress, spec.Ipv4PrefixCount = t.AssociatePublicIP, t.IPPrefixCount
				if ct := t.ConnectionTracking; ct != nil {
					spec.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
						TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout,
					}
				}
			}
			data.NetworkInterfaces = append(data.NetworkInterfaces, spec)
		}
	} else if t.AssociatePublicIP != nil || t.ConnectionTracking != nil || t.IPPrefixCount != nil {
		// These live on a network interface, which then carries the groups too.
		eni := ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{
			DeviceIndex: aws.Int32(0), AssociatePublicIpAddress: t.AssociatePublicIP, Groups: t.SecurityGroupIDs, Ipv4PrefixCount: t.IPPrefixCount,
		}
		if ct := t.ConnectionTracking; ct != nil {
			eni.ConnectionTrackingSpecification = &ec2types.ConnectionTrackingSpecificationRequest{
				TcpEstablishedTimeout: ct.TCPEstablishedTimeout, UdpStreamTimeout: ct.UDPStreamTimeout, UdpTimeout: ct.UDPTimeout,
			}
		}
		data.NetworkInterfaces = []ec2types.LaunchTemplateInstanceNetworkInterfaceSpecificationRequest{eni}
	} else {
		data.SecurityGroupIds = t.SecurityGroupIDs
	}
	_, err := l.ec2.CreateLaunchTemplate(ctx, &ec2.CreateLaunchTemplateInput{
		LaunchTemplateName: aws.String(name),
		LaunchTemplateData: data,
		TagSpecifications:  []ec2types.TagSpecification{{ResourceType: ec2types.ResourceTypeLaunchTemplate, Tags: tags}},
	})
	return err
}

// Forget drops a template from what the store believes exists, so the next Ensure
// looks for it again (and makes it if it is gone).
func (l *LaunchTemplates) Forget(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.known, name)
}

// Owned lists this cluster's launch templates: name → the class they were made for.
func (l *LaunchTemplates) Owned(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	pages := ec2.NewDescribeLaunchTemplatesPaginator(l.ec2, &ec2.DescribeLaunchTemplatesInput{
		Filters: []ec2types.Filter{{Name: aws.String("tag:" + TagCluster), Values: []string{l.cluster}}},
	})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing launch templates, %w", err)
		}
		for _, lt := range page.LaunchTemplates {
			class := ""
			for _, tag := range lt.Tags {
				if aws.ToString(tag.Key) == TagNodeClass {
					class = aws.ToString(tag.Value)
				}
			}
			out[aws.ToString(lt.LaunchTemplateName)] = class
		}
	}
	return out, nil
}

// Delete removes a template by name; a missing one is not an error.
func (l *LaunchTemplates) Delete(ctx context.Context, name string) error {
	l.mu.Lock()
	delete(l.known, name)
	delete(l.used, name)
	l.mu.Unlock()
	if _, err := l.ec2.DeleteLaunchTemplate(ctx, &ec2.DeleteLaunchTemplateInput{LaunchTemplateName: aws.String(name)}); err != nil &&
		!isCode(err, "InvalidLaunchTemplateName.NotFoundException", "InvalidLaunchTemplateId.NotFound") {
		return fmt.Errorf("deleting launch template %s, %w", name, err)
	}
	return nil
}

// DeleteForClass removes every template made for a class.
func (l *LaunchTemplates) DeleteForClass(ctx context.Context, class string) error {
	owned, err := l.Owned(ctx)
	if err != nil {
		return err
	}
	var errs []error
	for name, c := range owned {
		if c == class {
			errs = append(errs, l.Delete(ctx, name))
		}
	}
	UserDataBytes.DeleteLabelValues(class)
	return errors.Join(errs...)
}

// Sweep deletes this cluster's templates whose class is gone, and those no launch has
// used for idle (counting from this process's start for templates it never used):
// an instant fleet does not need its template once it returns, and a template is
// cheap to make again.
func (l *LaunchTemplates) Sweep(ctx context.Context, classExists func(string) bool, idle time.Duration) (deleted []string, err error) {
	owned, err := l.Owned(ctx)
	if err != nil {
		return nil, err
	}
	now := l.clock.Now()
	var errs []error
	for _, name := range sortedKeys(owned) {
		l.mu.Lock()
		last, ok := l.used[name]
		l.mu.Unlock()
		if !ok {
			last = l.started
		}
		exists := classExists(owned[name])
		if exists && now.Sub(last) < idle {
			continue
		}
		if err := l.Delete(ctx, name); err != nil {
			errs = append(errs, err)
			continue
		}
		if !exists {
			UserDataBytes.DeleteLabelValues(owned[name])
		}
		deleted = append(deleted, name)
	}
	return deleted, errors.Join(errs...)
}

func blockDevices(in []*awsv1.BlockDeviceMapping) []ec2types.LaunchTemplateBlockDeviceMappingRequest {
	var out []ec2types.LaunchTemplateBlockDeviceMappingRequest
	for _, m := range in {
		if m == nil || m.EBS == nil {
			continue
		}
		e := m.EBS
		ebs := &ec2types.LaunchTemplateEbsBlockDeviceRequest{
			DeleteOnTermination: e.DeleteOnTermination, Encrypted: e.Encrypted, KmsKeyId: e.KMSKeyID, SnapshotId: e.SnapshotID,
			VolumeInitializationRate: e.VolumeInitializationRate,
		}
		if e.IOPS != nil {
			ebs.Iops = aws.Int32(int32(*e.IOPS))
		}
		if e.Throughput != nil {
			ebs.Throughput = aws.Int32(int32(*e.Throughput))
		}
		if e.VolumeSize != nil {
			// EBS sizes are whole GiB; round up so a class never gets less than asked.
			gib := (e.VolumeSize.Value() + (1<<30 - 1)) >> 30
			ebs.VolumeSize = aws.Int32(int32(gib))
		}
		if e.VolumeType != nil {
			ebs.VolumeType = ec2types.VolumeType(*e.VolumeType)
		}
		out = append(out, ec2types.LaunchTemplateBlockDeviceMappingRequest{DeviceName: m.DeviceName, Ebs: ebs})
	}
	return out
}

// metadataOptions applies Karpenter's defaults: IMDSv2 required, one hop, so pods
// cannot reach the node's credentials.
func metadataOptions(m *awsv1.MetadataOptions) *ec2types.LaunchTemplateInstanceMetadataOptionsRequest {
	out := &ec2types.LaunchTemplateInstanceMetadataOptionsRequest{
		HttpEndpoint:            ec2types.LaunchTemplateInstanceMetadataEndpointStateEnabled,
		HttpProtocolIpv6:        ec2types.LaunchTemplateInstanceMetadataProtocolIpv6Disabled,
		HttpPutResponseHopLimit: aws.Int32(1),
		HttpTokens:              ec2types.LaunchTemplateHttpTokensStateRequired,
	}
	if m == nil {
		return out
	}
	if m.HTTPEndpoint != nil {
		out.HttpEndpoint = ec2types.LaunchTemplateInstanceMetadataEndpointState(*m.HTTPEndpoint)
	}
	if m.HTTPProtocolIPv6 != nil {
		out.HttpProtocolIpv6 = ec2types.LaunchTemplateInstanceMetadataProtocolIpv6(*m.HTTPProtocolIPv6)
	}
	if m.HTTPPutResponseHopLimit != nil {
		out.HttpPutResponseHopLimit = aws.Int32(int32(*m.HTTPPutResponseHopLimit))
	}
	if m.HTTPTokens != nil {
		out.HttpTokens = ec2types.LaunchTemplateHttpTokensState(*m.HTTPTokens)
	}
	return out
}

// isCode reports whether err is an AWS API error with one of the codes.
func isCode(err error, codes ...string) bool { return awserr.IsCode(err, codes...) }

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
