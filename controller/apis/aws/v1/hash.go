package v1

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
)

// Annotations a NodeClaim carries to tell which version of its class it launched from.
const (
	AnnotationEC2NodeClassHash        = Group + "/ec2nodeclass-hash"
	AnnotationEC2NodeClassHashVersion = Group + "/ec2nodeclass-hash-version"
	EC2NodeClassHashVersion           = "v1"
	// AnnotationInstanceProfile names the instance profile a claim launched with, as
	// Karpenter writes it: Karpenter's garbage collection keeps a profile a claim names.
	AnnotationInstanceProfile = Group + "/instance-profile-name"
	// AnnotationRetiringInstanceProfiles holds, on an EC2NodeClass, as JSON name →
	// RFC 3339 time, the instance profiles the class used before its role or profile
	// changed, and since when; each is deleted once no instance uses it. It lives in the
	// API so a restart does not forget (and leak) them.
	AnnotationRetiringInstanceProfiles = Group + "/retiring-instance-profiles"
)

// Hash identifies the settings of the class that shape a node once it is launched.
// Selector terms are left out: what they match can change without the spec
// changing, so drift compares their resolved results instead.
func (nc *EC2NodeClass) Hash() string {
	spec := nc.Spec.DeepCopy()
	spec.SubnetSelectorTerms = nil
	spec.SecurityGroupSelectorTerms = nil
	spec.AMISelectorTerms = nil
	spec.CapacityReservationSelectorTerms = nil
	b, _ := json.Marshal(spec)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
