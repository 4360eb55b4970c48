package v1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Well-known labels Dovetail sets on nodes and understands in requirements. Workloads
// written for Karpenter select on these, so the names are Karpenter's.
const (
	LabelNodePool                    = Group + "/nodepool"
	LabelCapacityType                = Group + "/capacity-type"
	LabelNodeInitialized             = Group + "/initialized"
	LabelNodeRegistered              = Group + "/registered"
	LabelDoNotSync                   = Group + "/do-not-sync-taints"
	CapacityTypeSpot                 = "spot"
	CapacityTypeOnDemand             = "on-demand"
	CapacityTypeReserved             = "reserved"
	ArchitectureAmd64                = "amd64"
	ArchitectureArm64                = "arm64"
	LabelTopologyZone                = corev1.LabelTopologyZone
	LabelTopologyRegion              = corev1.LabelTopologyRegion
	LabelInstanceType                = corev1.LabelInstanceTypeStable
	LabelArch                        = corev1.LabelArchStable
	LabelOS                          = corev1.LabelOSStable
	LabelHostname                    = corev1.LabelHostname
	LabelWindowsBuild                = corev1.LabelWindowsBuild
	LabelZoneID                      = "topology.k8s.aws/zone-id"
	NodeClassLabelPrefix             = "karpenter.k8s.aws/"
	LabelEC2NodeClass                = NodeClassLabelPrefix + "ec2nodeclass"
	LabelInstanceCategory            = NodeClassLabelPrefix + "instance-category"
	LabelInstanceFamily              = NodeClassLabelPrefix + "instance-family"
	LabelInstanceGen                 = NodeClassLabelPrefix + "instance-generation"
	LabelInstanceSize                = NodeClassLabelPrefix + "instance-size"
	LabelInstanceCPU                 = NodeClassLabelPrefix + "instance-cpu"
	LabelInstanceCPUMfr              = NodeClassLabelPrefix + "instance-cpu-manufacturer"
	LabelInstanceCPUClock            = NodeClassLabelPrefix + "instance-cpu-sustained-clock-speed-mhz"
	LabelInstanceMemory              = NodeClassLabelPrefix + "instance-memory"
	LabelInstanceEBSBw               = NodeClassLabelPrefix + "instance-ebs-bandwidth"
	LabelInstanceNetBw               = NodeClassLabelPrefix + "instance-network-bandwidth"
	LabelInstanceGPUName             = NodeClassLabelPrefix + "instance-gpu-name"
	LabelInstanceGPUMfr              = NodeClassLabelPrefix + "instance-gpu-manufacturer"
	LabelInstanceGPUCount            = NodeClassLabelPrefix + "instance-gpu-count"
	LabelInstanceGPUMem              = NodeClassLabelPrefix + "instance-gpu-memory"
	LabelInstanceAccName             = NodeClassLabelPrefix + "instance-accelerator-name"
	LabelInstanceAccMfr              = NodeClassLabelPrefix + "instance-accelerator-manufacturer"
	LabelInstanceAccCount            = NodeClassLabelPrefix + "instance-accelerator-count"
	LabelInstanceLocalNVMe           = NodeClassLabelPrefix + "instance-local-nvme"
	LabelInstanceHypervisor          = NodeClassLabelPrefix + "instance-hypervisor"
	LabelInstanceEncryptionInTransit = NodeClassLabelPrefix + "instance-encryption-in-transit-supported"
	// A node launched into a capacity reservation carries its id and type
	// ("default" or "capacity-block"), as Karpenter's do.
	LabelCapacityReservationID = NodeClassLabelPrefix + "capacity-reservation-id"
	// LabelPlacementGroupID and LabelPlacementGroupPartition are a node's placement
	// group and, in a partition group, its partition (from 1).
	LabelPlacementGroupID        = NodeClassLabelPrefix + "placement-group-id"
	LabelPlacementGroupPartition = NodeClassLabelPrefix + "placement-group-partition"
	// LabelCapacityReservationInterruptible is "true" on a node of a reservation its
	// owner may reclaim.
	LabelCapacityReservationInterruptible = NodeClassLabelPrefix + "capacity-reservation-interruptible"
	LabelCapacityReservationType          = NodeClassLabelPrefix + "capacity-reservation-type"
)

// Annotations and finalizers.
const (
	DoNotDisruptAnnotationKey = Group + "/do-not-disrupt"
	// DoNotRepairAnnotationKey "true" on a Node keeps node repair (Karpenter
	// v1.15's disruption method) off it, whatever its conditions.
	DoNotRepairAnnotationKey                   = Group + "/do-not-repair"
	NodePoolHashAnnotationKey                  = Group + "/nodepool-hash"
	NodePoolHashVersionAnnotationKey           = Group + "/nodepool-hash-version"
	NodeClaimTerminationTimestampAnnotationKey = Group + "/nodeclaim-termination-timestamp"
	// RebootPreBootIDAnnotationKey keeps on a claim the node's boot ID from before
	// its reboot, so a new one says the reboot happened, across restarts too.
	RebootPreBootIDAnnotationKey = Group + "/reboot-pre-boot-id"
	// RebootTerminationGracePeriodAnnotationKey bounds a reboot's drain (a Go
	// duration; absent: unbounded, 0s: none).
	RebootTerminationGracePeriodAnnotationKey = Group + "/reboot-termination-grace-period"
	TerminationFinalizer                      = Group + "/termination"
	NodePoolHashVersion                       = "v3"
)

// Taints Dovetail places on nodes it manages.
var (
	DisruptedNoScheduleTaint = corev1.Taint{Key: Group + "/disrupted", Effect: corev1.TaintEffectNoSchedule}
	// RebootingNoScheduleTaint keeps new pods off a node repair reboots in place.
	RebootingNoScheduleTaint   = corev1.Taint{Key: Group + "/rebooting", Effect: corev1.TaintEffectNoSchedule}
	UnregisteredNoExecuteTaint = corev1.Taint{Key: Group + "/unregistered", Effect: corev1.TaintEffectNoExecute}
)

// WellKnownLabels are the label keys that the scheduler may resolve from an instance
// type rather than from a NodePool's template: a pod may require one of these even
// when no NodePool names it, because every launched node carries them.
var WellKnownLabels = sets.New(
	LabelNodePool, LabelCapacityType, LabelTopologyZone, LabelTopologyRegion,
	LabelInstanceType, LabelArch, LabelOS, LabelWindowsBuild, LabelZoneID,
	LabelEC2NodeClass, LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGen,
	LabelInstanceSize, LabelInstanceCPU, LabelInstanceCPUMfr, LabelInstanceCPUClock,
	LabelInstanceMemory, LabelInstanceEBSBw, LabelInstanceNetBw, LabelInstanceGPUName,
	LabelInstanceGPUMfr, LabelInstanceGPUCount, LabelInstanceGPUMem, LabelInstanceAccName,
	LabelInstanceAccMfr, LabelInstanceAccCount, LabelInstanceLocalNVMe,
	LabelInstanceHypervisor, LabelInstanceEncryptionInTransit, LabelPlacementGroupID, LabelPlacementGroupPartition,
)

// InstanceTypeLabels are the well-known labels an instance type defines. A node
// carries one only when its type has it, so a type without one satisfies only NotIn
// and DoesNotExist on it, as a Node's missing label does in Kubernetes: the engine
// gives such a type the requirement DoesNotExist, as Karpenter's AWS provider does.
// (Instance type, zone and capacity type are on every type; the node class and
// placement group labels come from the class, not the type.)
var InstanceTypeLabels = sets.New(
	LabelArch, LabelOS, LabelWindowsBuild,
	LabelInstanceCategory, LabelInstanceFamily, LabelInstanceGen,
	LabelInstanceSize, LabelInstanceCPU, LabelInstanceCPUMfr, LabelInstanceCPUClock,
	LabelInstanceMemory, LabelInstanceEBSBw, LabelInstanceNetBw, LabelInstanceGPUName,
	LabelInstanceGPUMfr, LabelInstanceGPUCount, LabelInstanceGPUMem, LabelInstanceAccName,
	LabelInstanceAccMfr, LabelInstanceAccCount, LabelInstanceLocalNVMe,
	LabelInstanceHypervisor, LabelInstanceEncryptionInTransit,
)

// RestrictedLabels may not appear in a NodePool's template labels or requirements:
// the controller sets them itself.
var RestrictedLabels = sets.New(LabelNodePool, LabelHostname)

// NormalizedLabels maps deprecated label keys to the ones Dovetail uses, so that old
// nodeSelectors keep working.
var NormalizedLabels = map[string]string{
	corev1.LabelFailureDomainBetaZone:   LabelTopologyZone,
	corev1.LabelFailureDomainBetaRegion: LabelTopologyRegion,
	"beta.kubernetes.io/arch":           LabelArch,
	"beta.kubernetes.io/os":             LabelOS,
	corev1.LabelInstanceType:            LabelInstanceType,
	// The EBS CSI driver writes a volume's zone under its own key; the zone is
	// the node's zone.
	"topology.ebs.csi.aws.com/zone": LabelTopologyZone,
}
