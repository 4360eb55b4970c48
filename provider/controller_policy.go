package provider

// docs/iam.md lists every action of the policy with the code that calls it.
//go:generate go run ../hack/iamdocs -root .. -o ../docs/iam.md

import (
	"encoding/json"
	"fmt"
	"strings"
)

// ControllerPolicyInput names what the controller's permissions are scoped to.
type ControllerPolicyInput struct {
	Partition   string
	Region      string
	AccountID   string
	ClusterName string
	NodeRoleARN string
	// InterruptionQueueARN is optional; without it no SQS permission is granted.
	InterruptionQueueARN string
	// InterruptionQueueKMSKey is the customer managed key that encrypts the queue, as
	// a key ARN, key ID, alias name or alias ARN (whatever the queue's
	// kms_master_key_id holds); receiving a message needs kms:Decrypt on it.
	InterruptionQueueKMSKey string
	// AMISSMParameterARNs are parameters beyond /aws/service/* the controller may
	// read, for amiSelectorTerms that name an ssmParameter of the user's.
	AMISSMParameterARNs []string
}

type statement struct {
	Sid       string                    `json:"Sid"`
	Effect    string                    `json:"Effect"`
	Action    []string                  `json:"Action"`
	Resource  []string                  `json:"Resource"`
	Condition map[string]map[string]any `json:"Condition,omitempty"`
}

// ControllerPolicy is the least-privilege IAM policy of the controller: read actions
// limited to the region, and every write scoped by the tags the controller puts on
// what it creates (instances, volumes and launch templates carry
// kubernetes.io/cluster/<cluster>=owned and a nodepool, launch templates also
// karpenter.k8s.aws/cluster=<cluster>; instance profiles the cluster, region and
// class), with iam:PassRole for the node role only.
func ControllerPolicy(in ControllerPolicyInput) (string, error) {
	if in.ClusterName == "" || in.Region == "" || in.NodeRoleARN == "" {
		return "", fmt.Errorf("cluster_name, region and node_role_arn are required")
	}
	p := in.Partition
	if p == "" {
		p = "aws"
	}
	ec2ARN := func(kind string) string { return fmt.Sprintf("arn:%s:ec2:%s:*:%s/*", p, in.Region, kind) }
	ec2Public := func(kind string) string { return fmt.Sprintf("arn:%s:ec2:%s::%s/*", p, in.Region, kind) }
	clusterTag := "kubernetes.io/cluster/" + in.ClusterName
	account := in.AccountID
	if account == "" {
		account = "*"
	}
	launched := []string{ec2ARN("fleet"), ec2ARN("instance"), ec2ARN("volume"), ec2ARN("network-interface"), ec2ARN("spot-instances-request")}
	statements := []statement{
		{Sid: "AllowScopedEC2InstanceAccessActions", Effect: "Allow", Action: []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resource: []string{ec2Public("image"), ec2Public("snapshot"), ec2ARN("security-group"), ec2ARN("subnet"), ec2ARN("capacity-reservation")}},
		{Sid: "AllowScopedEC2LaunchTemplateAccessActions", Effect: "Allow", Action: []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resource:  []string{ec2ARN("launch-template")},
			Condition: map[string]map[string]any{"StringEquals": {"aws:ResourceTag/karpenter.k8s.aws/cluster": in.ClusterName}}},
		{Sid: "AllowScopedEC2InstanceActionsWithTags", Effect: "Allow", Action: []string{"ec2:RunInstances", "ec2:CreateFleet"},
			Resource: launched,
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + clusterTag: "owned", "aws:RequestTag/eks:eks-cluster-name": in.ClusterName},
				"StringLike":   {"aws:RequestTag/karpenter.sh/nodepool": "*"},
			}},
		{Sid: "AllowScopedLaunchTemplateCreation", Effect: "Allow", Action: []string{"ec2:CreateLaunchTemplate"},
			Resource:  []string{ec2ARN("launch-template")},
			Condition: map[string]map[string]any{"StringEquals": {"aws:RequestTag/karpenter.k8s.aws/cluster": in.ClusterName}}},
		{Sid: "AllowScopedResourceCreationTagging", Effect: "Allow", Action: []string{"ec2:CreateTags"},
			Resource: append(append([]string{}, launched...), ec2ARN("launch-template")),
			Condition: map[string]map[string]any{
				"StringEquals": {"ec2:CreateAction": []string{"RunInstances", "CreateFleet", "CreateLaunchTemplate"}},
			}},
		// Deletion is scoped as Karpenter's own policy scopes it, by the tags Karpenter
		// and Dovetail both put on every instance and launch template they create: a
		// cluster taken over from Karpenter has only those on its instances, and an
		// instance carrying merely karpenter.k8s.aws/cluster is not the cluster's.
		{Sid: "AllowScopedDeletion", Effect: "Allow", Action: []string{"ec2:TerminateInstances", "ec2:DeleteLaunchTemplate"},
			Resource: []string{ec2ARN("instance"), ec2ARN("launch-template")},
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + clusterTag: "owned"},
				"StringLike":   {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
			}},
		// RebootForRepair reboots a node in place; scoped as deletion is.
		{Sid: "AllowScopedReboot", Effect: "Allow", Action: []string{"ec2:RebootInstances"},
			Resource: []string{ec2ARN("instance")},
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + clusterTag: "owned"},
				"StringLike":   {"aws:ResourceTag/karpenter.sh/nodepool": "*"},
			}},
		{Sid: "AllowRegionalReadActions", Effect: "Allow",
			Action: []string{"ec2:DescribeCapacityReservations", "ec2:DescribeImages", "ec2:DescribeInstances", "ec2:DescribeInstanceStatus", "ec2:DescribePlacementGroups",
				"ec2:DescribeInstanceTypeOfferings", "ec2:DescribeInstanceTypes", "ec2:DescribeLaunchTemplates", "ec2:DescribeSecurityGroups",
				"ec2:DescribeSpotPriceHistory", "ec2:DescribeSubnets"},
			Resource:  []string{"*"},
			Condition: map[string]map[string]any{"StringEquals": {"aws:RequestedRegion": in.Region}}},
		{Sid: "AllowSSMReadActions", Effect: "Allow", Action: []string{"ssm:GetParameter"},
			Resource: append([]string{fmt.Sprintf("arn:%s:ssm:%s::parameter/aws/service/*", p, in.Region)}, in.AMISSMParameterARNs...)},
		{Sid: "AllowPricingReadActions", Effect: "Allow", Action: []string{"pricing:GetProducts"}, Resource: []string{"*"}},
		{Sid: "AllowPassingInstanceRole", Effect: "Allow", Action: []string{"iam:PassRole"}, Resource: []string{in.NodeRoleARN},
			Condition: map[string]map[string]any{"StringEquals": {"iam:PassedToService": "ec2.amazonaws.com"}}},
		{Sid: "AllowScopedInstanceProfileCreationActions", Effect: "Allow", Action: []string{"iam:CreateInstanceProfile"},
			Resource: []string{fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p, account)},
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:RequestTag/" + clusterTag: "owned", "aws:RequestTag/topology.kubernetes.io/region": in.Region},
				"StringLike":   {"aws:RequestTag/karpenter.k8s.aws/ec2nodeclass": "*"},
			}},
		// Tagging is scoped by the profile's own tags, as Karpenter scopes it: on request
		// tags alone the controller could tag any profile in the account as the
		// cluster's, then remove its roles or delete it.
		{Sid: "AllowScopedInstanceProfileActions", Effect: "Allow",
			Action:   []string{"iam:AddRoleToInstanceProfile", "iam:RemoveRoleFromInstanceProfile", "iam:DeleteInstanceProfile", "iam:TagInstanceProfile"},
			Resource: []string{fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p, account)},
			Condition: map[string]map[string]any{
				"StringEquals": {"aws:ResourceTag/" + clusterTag: "owned", "aws:ResourceTag/topology.kubernetes.io/region": in.Region},
				"StringLike":   {"aws:ResourceTag/karpenter.k8s.aws/ec2nodeclass": "*"},
			}},
		{Sid: "AllowInstanceProfileReadActions", Effect: "Allow", Action: []string{"iam:GetInstanceProfile"},
			Resource: []string{fmt.Sprintf("arn:%s:iam::%s:instance-profile/*", p, account)}},
		{Sid: "AllowAPIServerEndpointDiscovery", Effect: "Allow", Action: []string{"eks:DescribeCluster"},
			Resource: []string{fmt.Sprintf("arn:%s:eks:%s:%s:cluster/%s", p, in.Region, account, in.ClusterName)}},
	}
	if in.InterruptionQueueARN != "" {
		statements = append(statements, statement{Sid: "AllowInterruptionQueueActions", Effect: "Allow",
			Action: []string{"sqs:DeleteMessage", "sqs:GetQueueUrl", "sqs:ReceiveMessage"}, Resource: []string{in.InterruptionQueueARN}})
	}
	if key := in.InterruptionQueueKMSKey; key != "" {
		statements = append(statements, queueKeyStatement(key, p, in.Region, account))
	}
	b, err := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": statements})
	return string(b), err
}

// queueKeyStatement lets SQS decrypt the queue's messages for the controller, and
// nothing else: the key is named by ARN when it can be, else by the alias it carries
// (an alias ARN is not a resource IAM matches key use against).
func queueKeyStatement(key, partition, region, account string) statement {
	via := map[string]any{"kms:ViaService": fmt.Sprintf("sqs.%s.amazonaws.com", region)}
	st := statement{Sid: "AllowInterruptionQueueDecryption", Effect: "Allow", Action: []string{"kms:Decrypt"},
		Condition: map[string]map[string]any{"StringEquals": via}}
	keys := fmt.Sprintf("arn:%s:kms:%s:%s:key/", partition, region, account)
	switch {
	case strings.HasPrefix(key, "alias/"):
		st.Resource = []string{keys + "*"}
		st.Condition["ForAnyValue:StringEquals"] = map[string]any{"kms:ResourceAliases": key}
	case strings.HasPrefix(key, "arn:") && strings.Contains(key, ":alias/"):
		st.Resource = []string{keys + "*"}
		st.Condition["ForAnyValue:StringEquals"] = map[string]any{"kms:ResourceAliases": key[strings.Index(key, ":alias/")+1:]}
	case strings.HasPrefix(key, "arn:"):
		st.Resource = []string{key}
	default:
		st.Resource = []string{keys + key}
	}
	return st
}
