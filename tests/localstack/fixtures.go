package localstack

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// NodeClass is the EC2NodeClass the local NodePools reference (the kwok provider
// only needs it to exist).
func NodeClass(name string) *awsv1.EC2NodeClass {
	return &awsv1.EC2NodeClass{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: awsv1.EC2NodeClassSpec{
			Role:                       "KarpenterNodeRole-local",
			AMISelectorTerms:           []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}},
			SubnetSelectorTerms:        []awsv1.SubnetSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "local"}}},
			SecurityGroupSelectorTerms: []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{"karpenter.sh/discovery": "local"}}},
		},
	}
}

// Requirement builds a NodePool requirement.
func Requirement(key string, op v1.RequirementOperator, values ...string) v1.NodePoolRequirement {
	return v1.NodePoolRequirement{Key: key, RequirementBody: v1.RequirementBody{Operator: op, Values: values}}
}

// NodePool builds a NodePool on the "default" node class with Karpenter's defaults
// spelled out and consolidation off.
func NodePool(name string, reqs ...v1.NodePoolRequirement) *v1.NodePool {
	return &v1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: v1.NodePoolSpec{
			Template: v1.NodeClaimTemplate{Spec: v1.NodeClaimTemplateSpec{
				Requirements: reqs,
				NodeClassRef: &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"},
				ExpireAfter:  v1.MustParseNillableDuration("720h"),
			}},
			Disruption: v1.Disruption{ConsolidateAfter: v1.MustParseNillableDuration("Never"),
				ConsolidationPolicy: v1.ConsolidationPolicyWhenEmptyOrUnderutilized, Budgets: []v1.Budget{{Nodes: "10%"}}},
		},
	}
}

// GeneralNodePool is Karpenter's getting-started pool: c/m/r families, on-demand,
// either architecture.
func GeneralNodePool(name string) *v1.NodePool {
	return NodePool(name,
		Requirement(v1.LabelCapacityType, v1.OpIn, v1.CapacityTypeOnDemand),
		Requirement(v1.LabelArch, v1.OpIn, v1.ArchitectureAmd64, v1.ArchitectureArm64),
		Requirement(v1.LabelInstanceCategory, v1.OpIn, "c", "m", "r"))
}

// Deployment builds a pause Deployment whose pods request cpu and memory.
func Deployment(name string, replicas int32, cpu, memory string, mutate ...func(*corev1.PodSpec)) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	zero := int64(0)
	spec := corev1.PodSpec{
		TerminationGracePeriodSeconds: &zero,
		Containers: []corev1.Container{{Name: "pause", Image: "registry.k8s.io/pause:3.10", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
		}}},
	}
	for _, m := range mutate {
		m(&spec)
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}
}

// DaemonSet runs a pause pod with these requests on every node it tolerates, with
// no grace period.
func DaemonSet(name, cpu, memory string, mutate ...func(*corev1.PodSpec)) *appsv1.DaemonSet {
	d := Deployment(name, 0, cpu, memory, mutate...)
	return &appsv1.DaemonSet{ObjectMeta: d.ObjectMeta, Spec: appsv1.DaemonSetSpec{Selector: d.Spec.Selector, Template: d.Spec.Template}}
}
