// Package classtypes is what an EC2NodeClass makes of the instance types it may
// launch: which it can launch at all (cpuOptions, enclaves, its placement group,
// its network interfaces), and what a node of each holds under it (the kubelet's
// pod limit and reservations, ephemeral storage, a Windows family's resources).
// The AWS provider launches by it and every prediction plans by it; it is pure,
// so the CLI links no AWS client.
package classtypes

import (
	"fmt"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// resourceEFA is the EFA device plugin's resource.
const resourceEFA = "vpc.amazonaws.com/efa"

// Entry is the catalog entry as a node of the class is, and whether the class can
// launch it at all. Offerings are left as they are: where and at what price is the
// caller's to say.
func Entry(e catalog.Entry, class *awsv1.EC2NodeClass, reservedENIs int) (catalog.Entry, bool) {
	if !compatible(class, e) {
		return e, false
	}
	e = withInterfaces(e, class.Spec.NetworkInterfaces, reservedENIs)
	e = inPlacementGroup(e, class)
	fam := userdata.FamilyOf(class)
	if userdata.IsWindows(fam) {
		if e.Architecture != v1.ArchitectureAmd64 {
			// The EKS Windows images are amd64 only.
			return e, false
		}
		e = asWindows(e, fam)
	}
	e.Pods = maxPods(e, class)
	e.EphemeralStorage = ephemeralStorage(class, e)
	return e, true
}

// Of is the engine's view of the catalog as the class makes it: the types it can
// launch, shaped by Entry, with allocatable under its kubelet. f holds the types
// as EC2 describes them (the embedded catalog: every interface counted), so the
// reserved ENIs are taken from their pods here, as the controller's own list of
// types takes them.
func Of(f *catalog.File, class *awsv1.EC2NodeClass, reservedENIs int, vmMemoryOverheadPercent float64) []*scheduling.InstanceType {
	out := &catalog.File{InstanceTypes: make([]catalog.Entry, 0, len(f.InstanceTypes))}
	for _, e := range f.InstanceTypes {
		if e, ok := Entry(e.WithReservedENIs(reservedENIs), class, reservedENIs); ok {
			out.InstanceTypes = append(out.InstanceTypes, e)
		}
	}
	return ForEngine(out, class, vmMemoryOverheadPercent)
}

// ForEngine is the engine's view of types already shaped by Entry: allocatable
// under the class's kubelet, and a partition group's partitions as a requirement
// (a pod may ask for one).
func ForEngine(f *catalog.File, class *awsv1.EC2NodeClass, vmMemoryOverheadPercent float64) []*scheduling.InstanceType {
	types := f.ForEngine(Allocatable(class, vmMemoryOverheadPercent))
	if parts := Partitions(PlacementGroup(class)); len(parts) > 0 {
		for _, it := range types {
			it.Requirements[v1.LabelPlacementGroupPartition] = scheduling.MustRequirement(v1.LabelPlacementGroupPartition, v1.OpIn, parts...)
		}
	}
	return types
}

// PrivateIPv4Address is the resource the VPC resource controller adds to Windows
// pods' requests: each takes a secondary address of the node's primary interface.
const PrivateIPv4Address corev1.ResourceName = "vpc.amazonaws.com/PrivateIPv4Address"

// WindowsMaxPods is a Windows node's pod limit unless the kubelet says otherwise:
// the EKS Windows bootstrap does not derive it from the interfaces.
const WindowsMaxPods = 110

// asWindows is the type as a node of a Windows family is: kubernetes.io/os windows
// and the family's build, 110 pods, and the primary interface's secondary
// addresses as PrivateIPv4Address, which Windows pods request.
func asWindows(e catalog.Entry, fam string) catalog.Entry {
	e.OperatingSystems = []string{"windows"}
	labels := make(map[string]string, len(e.Labels)+1)
	for k, v := range e.Labels {
		labels[k] = v
	}
	labels[v1.LabelWindowsBuild] = userdata.WindowsBuilds[fam]
	e.Labels = labels
	e.Pods = WindowsMaxPods
	resources := make(map[string]string, len(e.Resources)+1)
	for k, v := range e.Resources {
		resources[k] = v
	}
	resources[string(PrivateIPv4Address)] = fmt.Sprint(max(e.IPv4PerInterface-1, 0))
	e.Resources = resources
	return e
}

// compatible reports whether the class may launch the type: with cpuOptions
// nestedVirtualization enabled, only types whose processors support it, as
// Karpenter filters them (EC2 would refuse the launch template on the others).
func compatible(class *awsv1.EC2NodeClass, e catalog.Entry) bool {
	if o := class.Spec.CPUOptions; o != nil && o.NestedVirtualization != nil && *o.NestedVirtualization == awsv1.NestedVirtualizationEnabled &&
		!slices.Contains(e.ProcessorFeatures, string(ec2types.SupportedAdditionalProcessorFeatureNestedVirtualization)) {
		return false
	}
	if o := class.Spec.EnclaveOptions; o != nil && o.Enabled && !e.NitroEnclaves {
		return false
	}
	if pg := PlacementGroup(class); pg != nil && !slices.Contains(e.PlacementStrategies, pg.Strategy) {
		return false
	}
	return fitsInterfaces(class.Spec.NetworkInterfaces, e)
}

// inPlacementGroup labels the type's nodes with the class's placement group and,
// for a partition group, the partitions a node may be in (a pod may ask for one).
func inPlacementGroup(e catalog.Entry, class *awsv1.EC2NodeClass) catalog.Entry {
	pg := PlacementGroup(class)
	if pg == nil {
		return e
	}
	labels := make(map[string]string, len(e.Labels)+1)
	for k, v := range e.Labels {
		labels[k] = v
	}
	labels[v1.LabelPlacementGroupID] = pg.ID
	e.Labels = labels
	return e
}

// PlacementGroup is the group the class's placementGroupSelector resolved to, or
// nil: a group still in status after the selector was removed places nothing.
func PlacementGroup(class *awsv1.EC2NodeClass) *awsv1.PlacementGroup {
	if class.Spec.PlacementGroupSelector == nil {
		return nil
	}
	return class.Status.PlacementGroup
}

// Partitions are a partition group's partition numbers, from 1.
func Partitions(pg *awsv1.PlacementGroup) []string {
	if pg == nil || pg.Strategy != string(ec2types.PlacementStrategyPartition) {
		return nil
	}
	out := make([]string, pg.PartitionCount)
	for i := range out {
		out[i] = fmt.Sprint(i + 1)
	}
	return out
}

// fitsInterfaces reports whether the type takes the class's networkInterfaces
// layout, as Karpenter checks it: every card index it names, every device index
// within the card's interfaces, and no more EFA-only interfaces than it has.
func fitsInterfaces(nis []*awsv1.NetworkInterface, e catalog.Entry) bool {
	efaOnly := int64(0)
	for _, ni := range nis {
		if ni == nil {
			continue
		}
		if int(ni.NetworkCardIndex) >= len(e.NetworkCards) || int64(ni.DeviceIndex) >= e.NetworkCards[ni.NetworkCardIndex] {
			return false
		}
		if ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
			efaOnly++
		}
	}
	return efaOnly <= e.EFAInterfaces
}

// withInterfaces is the type under the class's networkInterfaces layout: EFA-only
// interfaces on the first card hold no pod addresses, so the ENI-limited pod count
// drops by theirs; the layout's EFA-only interfaces are the node's EFA devices.
func withInterfaces(e catalog.Entry, nis []*awsv1.NetworkInterface, reservedENIs int) catalog.Entry {
	if len(nis) == 0 {
		return e
	}
	efaOnly, onFirstCard := int64(0), int64(0)
	for _, ni := range nis {
		if ni != nil && ni.InterfaceType == awsv1.InterfaceTypeEFAOnly {
			efaOnly++
			if ni.NetworkCardIndex == 0 {
				onFirstCard++
			}
		}
	}
	if len(e.NetworkCards) > 0 && e.IPv4PerInterface > 0 {
		e.Pods = catalog.ENILimitedPods(e.NetworkCards[0]-int64(reservedENIs)-onFirstCard, e.IPv4PerInterface)
	}
	resources := make(map[string]string, len(e.Resources)+1)
	for k, v := range e.Resources {
		resources[k] = v
	}
	delete(resources, resourceEFA)
	if efaOnly > 0 {
		resources[resourceEFA] = fmt.Sprint(efaOnly)
	}
	e.Resources = resources
	return e
}

// ephemeralStorage is what the kubelet's root directory sits on, as Karpenter counts
// it: the instance-store disks striped together under instanceStorePolicy RAID0 (on
// types that have them), else the volume marked rootVolume, else the family's data
// volume (the root volume, or Bottlerocket's second one) as the class or the family's
// defaults size it.
func ephemeralStorage(class *awsv1.EC2NodeClass, e catalog.Entry) string {
	if p := class.Spec.InstanceStorePolicy; p != nil && *p == awsv1.InstanceStorePolicyRAID0 {
		if gb := e.Labels[v1.LabelInstanceLocalNVMe]; gb != "" && gb != "0" {
			return gb + "G"
		}
	}
	fam := userdata.FamilyOf(class)
	devices := class.Spec.BlockDeviceMappings
	if len(devices) == 0 {
		devices = DefaultBlockDevices(fam)
	}
	dataDevice := "/dev/xvda"
	switch {
	case fam == userdata.FamilyBottlerocket:
		dataDevice = "/dev/xvdb"
	case userdata.IsWindows(fam):
		dataDevice = "/dev/sda1"
	}
	var chosen *awsv1.BlockDeviceMapping
	for _, d := range devices {
		if d == nil || d.EBS == nil || d.EBS.VolumeSize == nil {
			continue
		}
		if d.RootVolume {
			chosen = d
			break
		}
		if d.DeviceName != nil && *d.DeviceName == dataDevice && chosen == nil {
			chosen = d
		}
	}
	if chosen == nil {
		return e.EphemeralStorage
	}
	return chosen.EBS.VolumeSize.String()
}

// maxPods is the pod limit of the type under the class: ENI-derived (per prefix
// with ipPrefixCount), then the kubelet's maxPods and podsPerCore.
func maxPods(e catalog.Entry, class *awsv1.EC2NodeClass) int64 {
	pods := e.Pods
	if n := class.Spec.IPPrefixCount; n != nil && *n > 0 && !slices.Contains(e.OperatingSystems, "windows") {
		pods = prefixDelegatedPods(e)
	}
	kubelet := class.Spec.Kubelet
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

// prefixDelegatedPods is the pod limit of a node whose interfaces hold /28
// prefixes instead of single addresses (ipPrefixCount): each address slot of the
// ENI-limited count becomes 16, capped as EKS's max-pods calculator caps prefix
// delegation (110 under 30 vCPUs, 250 from there), since the kubelet is not
// tested beyond those.
func prefixDelegatedPods(e catalog.Entry) int64 {
	pods := (e.Pods-2)*16 + 2
	limit := int64(250)
	if cpu := resource.MustParse(e.CPU); cpu.Value() < 30 {
		limit = 110
	}
	return max(min(pods, limit), e.Pods)
}

// Allocatable are the allocatable formula's settings on a node of the class: its
// kubelet's reservations and eviction thresholds, with the controller's VM memory
// overhead.
func Allocatable(class *awsv1.EC2NodeClass, vmMemoryOverheadPercent float64) scheduling.AllocatableSettings {
	s := scheduling.DefaultAllocatableSettings()
	s.VMMemoryOverheadPercent = vmMemoryOverheadPercent
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

// DefaultBlockDevices are the root volumes Karpenter gives each family when the class
// names none: encrypted gp3, 20Gi (Bottlerocket: 4Gi OS + 20Gi data).
func DefaultBlockDevices(family string) []*awsv1.BlockDeviceMapping {
	volume := func(device string, size string) *awsv1.BlockDeviceMapping {
		q := resource.MustParse(size)
		return &awsv1.BlockDeviceMapping{DeviceName: aws.String(device), EBS: &awsv1.BlockDevice{
			VolumeSize: &q, VolumeType: aws.String("gp3"), Encrypted: aws.Bool(true), DeleteOnTermination: aws.Bool(true)}}
	}
	switch family {
	case userdata.FamilyBottlerocket:
		return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "4Gi"), volume("/dev/xvdb", "20Gi")}
	case userdata.FamilyCustom:
		return nil
	case userdata.FamilyWindows2019, userdata.FamilyWindows2022, userdata.FamilyWindows2025:
		return []*awsv1.BlockDeviceMapping{volume("/dev/sda1", "50Gi")}
	}
	return []*awsv1.BlockDeviceMapping{volume("/dev/xvda", "20Gi")}
}
