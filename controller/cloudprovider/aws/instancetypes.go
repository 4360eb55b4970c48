// Package aws is the EC2 cloud provider. This file turns EC2's description of an
// instance type into Karpenter's well-known labels and node capacity; the same code
// serves the live DescribeInstanceTypes path and the embedded catalog generator.
package aws

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/catalog"
)

// Extended resource names EC2 devices are advertised under by their device plugins.
const (
	ResourceNVIDIAGPU   = "nvidia.com/gpu"
	ResourceAMDGPU      = "amd.com/gpu"
	ResourceNeuron      = "aws.amazon.com/neuron"
	ResourceNeuronCore  = "aws.amazon.com/neuroncore"
	ResourceEFA         = "vpc.amazonaws.com/efa"
	ResourcePrivateIPv4 = "vpc.amazonaws.com/PrivateIPv4Address"
)

// Architecture maps EC2's architecture names to Kubernetes'; ok is false for those
// Kubernetes nodes cannot run (i386, Mac).
func Architecture(info ec2types.InstanceTypeInfo) (string, bool) {
	if info.ProcessorInfo == nil {
		return "", false
	}
	for _, a := range info.ProcessorInfo.SupportedArchitectures {
		switch a {
		case ec2types.ArchitectureTypeX8664:
			return v1.ArchitectureAmd64, true
		case ec2types.ArchitectureTypeArm64:
			return v1.ArchitectureArm64, true
		}
	}
	return "", false
}

// ENIMaxPods is the pod limit of the VPC CNI without prefix delegation: each ENI of
// the default network card (the only one the CNI uses) but those reserved holds a
// pod per address but its primary, plus two host-network pods; none when the
// reserved take every ENI, as Karpenter counts it.
func ENIMaxPods(info ec2types.InstanceTypeInfo, reservedENIs int) int64 {
	n := info.NetworkInfo
	if n == nil || n.MaximumNetworkInterfaces == nil || n.Ipv4AddressesPerInterface == nil {
		return 110
	}
	// Card 0 when EC2 names no default, as the class shaping (withInterfaces) reads it.
	enis, def := int64(*n.MaximumNetworkInterfaces), int32(0)
	if n.DefaultNetworkCardIndex != nil {
		def = *n.DefaultNetworkCardIndex
	}
	for _, card := range n.NetworkCards {
		if card.NetworkCardIndex != nil && *card.NetworkCardIndex == def && card.MaximumNetworkInterfaces != nil {
			enis = int64(*card.MaximumNetworkInterfaces)
		}
	}
	return catalog.ENILimitedPods(enis-int64(reservedENIs), int64(*n.Ipv4AddressesPerInterface))
}

// Labels are Karpenter's karpenter.k8s.aws/instance-* labels for the type.
func Labels(info ec2types.InstanceTypeInfo) map[string]string {
	name := string(info.InstanceType)
	family, size, _ := strings.Cut(name, ".")
	labels := map[string]string{
		v1.LabelInstanceFamily: family,
		v1.LabelInstanceSize:   size,
	}
	category, generation := splitFamily(family)
	labels[v1.LabelInstanceCategory] = category
	if generation != "" {
		labels[v1.LabelInstanceGen] = generation
	}
	if info.VCpuInfo != nil && info.VCpuInfo.DefaultVCpus != nil {
		labels[v1.LabelInstanceCPU] = fmt.Sprint(*info.VCpuInfo.DefaultVCpus)
	}
	if p := info.ProcessorInfo; p != nil {
		if p.Manufacturer != nil {
			labels[v1.LabelInstanceCPUMfr] = strings.ToLower(*p.Manufacturer)
		}
		if p.SustainedClockSpeedInGhz != nil {
			labels[v1.LabelInstanceCPUClock] = fmt.Sprint(int64(*p.SustainedClockSpeedInGhz * 1000))
		}
	}
	if info.MemoryInfo != nil && info.MemoryInfo.SizeInMiB != nil {
		labels[v1.LabelInstanceMemory] = fmt.Sprint(*info.MemoryInfo.SizeInMiB)
	}
	if info.Hypervisor != "" {
		labels[v1.LabelInstanceHypervisor] = string(info.Hypervisor)
	}
	if e := info.EbsInfo; e != nil && e.EbsOptimizedInfo != nil && e.EbsOptimizedInfo.MaximumBandwidthInMbps != nil {
		labels[v1.LabelInstanceEBSBw] = fmt.Sprint(*e.EbsOptimizedInfo.MaximumBandwidthInMbps)
	}
	if n := info.NetworkInfo; n != nil {
		if len(n.NetworkCards) > 0 && n.NetworkCards[0].BaselineBandwidthInGbps != nil {
			labels[v1.LabelInstanceNetBw] = fmt.Sprint(int64(*n.NetworkCards[0].BaselineBandwidthInGbps * 1000))
		}
		if n.EncryptionInTransitSupported != nil {
			labels[v1.LabelInstanceEncryptionInTransit] = strconv.FormatBool(*n.EncryptionInTransitSupported)
		}
	}
	if s := info.InstanceStorageInfo; s != nil && s.NvmeSupport != ec2types.EphemeralNvmeSupportUnsupported && s.TotalSizeInGB != nil {
		labels[v1.LabelInstanceLocalNVMe] = fmt.Sprint(*s.TotalSizeInGB)
	}
	if g := info.GpuInfo; g != nil && len(g.Gpus) > 0 {
		gpu := g.Gpus[0]
		if gpu.Name != nil {
			labels[v1.LabelInstanceGPUName] = lowerKebabCase(*gpu.Name)
		}
		if gpu.Manufacturer != nil {
			labels[v1.LabelInstanceGPUMfr] = lowerKebabCase(*gpu.Manufacturer)
		}
		if gpu.Count != nil {
			labels[v1.LabelInstanceGPUCount] = fmt.Sprint(*gpu.Count)
		}
		if gpu.MemoryInfo != nil && gpu.MemoryInfo.SizeInMiB != nil {
			labels[v1.LabelInstanceGPUMem] = fmt.Sprint(*gpu.MemoryInfo.SizeInMiB)
		}
	}
	if n := info.NeuronInfo; n != nil && len(n.NeuronDevices) > 0 {
		d := n.NeuronDevices[0]
		if d.Name != nil {
			labels[v1.LabelInstanceAccName] = lowerKebabCase(*d.Name)
		}
		labels[v1.LabelInstanceAccMfr] = "aws"
		if d.Count != nil {
			labels[v1.LabelInstanceAccCount] = fmt.Sprint(*d.Count)
		}
	}
	return labels
}

// lowerKebabCase makes a device name a label value as Karpenter does ("Radeon Pro
// V520" is radeon-pro-v520): a label value cannot hold spaces, and a node selector
// naming one would match no node, as kube-apiserver would refuse such a label.
func lowerKebabCase(s string) string {
	return strings.ToLower(strings.ReplaceAll(s, " ", "-"))
}

// splitFamily splits "c6gn" into category "c" and generation "6", and a
// high-memory family "u-6tb1" into "u" and "1", as Karpenter reads it (a label
// value cannot end in "-").
func splitFamily(family string) (category, generation string) {
	i := strings.IndexFunc(family, func(r rune) bool { return !unicode.IsLetter(r) })
	if i < 0 {
		return family, ""
	}
	category, rest := family[:i], family[i:]
	if strings.HasPrefix(rest, "-") {
		// "-6tb" names the memory, not the generation.
		rest = strings.TrimLeftFunc(rest[1:], unicode.IsDigit)
		rest = strings.TrimPrefix(rest, "tb")
	}
	j := 0
	for j < len(rest) && unicode.IsDigit(rune(rest[j])) {
		j++
	}
	return category, rest[:j]
}

// ExtendedResources are the device-plugin resources a node of the type advertises.
func ExtendedResources(info ec2types.InstanceTypeInfo) map[string]string {
	out := map[string]string{}
	if g := info.GpuInfo; g != nil {
		var nvidia, amd int32
		for _, gpu := range g.Gpus {
			if gpu.Count == nil || gpu.Manufacturer == nil {
				continue
			}
			switch strings.ToLower(*gpu.Manufacturer) {
			case "nvidia":
				nvidia += *gpu.Count
			case "amd":
				amd += *gpu.Count
			}
		}
		if nvidia > 0 {
			out[ResourceNVIDIAGPU] = fmt.Sprint(nvidia)
		}
		if amd > 0 {
			out[ResourceAMDGPU] = fmt.Sprint(amd)
		}
	}
	if n := info.NeuronInfo; n != nil {
		var devices, cores int32
		for _, d := range n.NeuronDevices {
			if d.Count == nil {
				continue
			}
			devices += *d.Count
			if d.CoreInfo != nil && d.CoreInfo.Count != nil {
				cores += *d.Count * *d.CoreInfo.Count
			}
		}
		if devices > 0 {
			out[ResourceNeuron] = fmt.Sprint(devices)
			out[ResourceNeuronCore] = fmt.Sprint(cores)
		}
	}
	if n := info.NetworkInfo; n != nil && n.EfaInfo != nil && n.EfaInfo.MaximumEfaInterfaces != nil && *n.EfaInfo.MaximumEfaInterfaces > 0 {
		out[ResourceEFA] = fmt.Sprint(*n.EfaInfo.MaximumEfaInterfaces)
	}
	return out
}

// CatalogEntry describes the type for the engine, with offerings in the given zones.
// Spot offerings carry the on-demand price until spot price history says otherwise:
// spot never costs more, so plans are never cheaper than reality.
func CatalogEntry(info ec2types.InstanceTypeInfo, zones []string, onDemandPrice float64, maxPods int64) (catalog.Entry, bool) {
	arch, ok := Architecture(info)
	if !ok || info.VCpuInfo == nil || info.VCpuInfo.DefaultVCpus == nil || info.MemoryInfo == nil || info.MemoryInfo.SizeInMiB == nil {
		return catalog.Entry{}, false
	}
	e := catalog.Entry{
		Name:         string(info.InstanceType),
		Architecture: arch,
		CPU:          fmt.Sprint(*info.VCpuInfo.DefaultVCpus),
		Memory:       fmt.Sprintf("%dMi", *info.MemoryInfo.SizeInMiB),
		Pods:         maxPods,
		Labels:       Labels(info),
	}
	if res := ExtendedResources(info); len(res) > 0 {
		e.Resources = res
	}
	if n := info.NetworkInfo; n != nil {
		if n.Ipv4AddressesPerInterface != nil {
			e.IPv4PerInterface = int64(*n.Ipv4AddressesPerInterface)
		}
		if n.EnaSupport != ec2types.EnaSupportUnsupported {
			// An interface layout needs ENA; without it the type fits none.
			for _, card := range n.NetworkCards {
				if card.NetworkCardIndex == nil || card.MaximumNetworkInterfaces == nil {
					continue
				}
				for int(*card.NetworkCardIndex) >= len(e.NetworkCards) {
					e.NetworkCards = append(e.NetworkCards, 0)
				}
				e.NetworkCards[*card.NetworkCardIndex] = int64(*card.MaximumNetworkInterfaces)
			}
		}
		if n.EfaInfo != nil && n.EfaInfo.MaximumEfaInterfaces != nil {
			e.EFAInterfaces = int64(*n.EfaInfo.MaximumEfaInterfaces)
		}
	}
	e.NitroEnclaves = info.NitroEnclavesSupport == ec2types.NitroEnclavesSupportSupported
	if pg := info.PlacementGroupInfo; pg != nil {
		for _, strategy := range pg.SupportedStrategies {
			e.PlacementStrategies = append(e.PlacementStrategies, string(strategy))
		}
	}
	if p := info.ProcessorInfo; p != nil {
		for _, f := range p.SupportedFeatures {
			e.ProcessorFeatures = append(e.ProcessorFeatures, string(f))
		}
	}
	spot := false
	for _, u := range info.SupportedUsageClasses {
		if u == ec2types.UsageClassTypeSpot {
			spot = true
		}
	}
	for _, z := range zones {
		e.Offerings = append(e.Offerings, catalog.Offering{Zone: z, CapacityType: v1.CapacityTypeOnDemand, Price: onDemandPrice, Available: true})
		if spot {
			e.Offerings = append(e.Offerings, catalog.Offering{Zone: z, CapacityType: v1.CapacityTypeSpot, Price: onDemandPrice, Available: true})
		}
	}
	return e, true
}
