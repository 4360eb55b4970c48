package iampolicy

import (
	"context"
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"
	"github.com/aws/aws-sdk-go-v2/service/pricing"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// iamRegion is the region IAM, a global service, is called in: what
// aws:RequestedRegion says for its actions.
const iamRegion = "us-east-1"

// call is one call being authorized.
type call struct {
	r      *Recorder
	ctx    context.Context
	region string
}

type builder func(c *call, input any) ([]Request, error)

// mappings are the operations the controller calls, by SDK service id and
// operation name, each turned into the requests AWS authorizes (see the Service
// Authorization Reference: actions, resource types and condition keys per action).
var mappings = map[string]map[string]builder{
	"EC2": {
		"DescribeCapacityReservations":  regional("ec2:DescribeCapacityReservations"),
		"DescribeImages":                regional("ec2:DescribeImages"),
		"DescribeInstances":             regional("ec2:DescribeInstances"),
		"DescribeInstanceStatus":        regional("ec2:DescribeInstanceStatus"),
		"DescribeInstanceTypes":         regional("ec2:DescribeInstanceTypes"),
		"DescribeInstanceTypeOfferings": regional("ec2:DescribeInstanceTypeOfferings"),
		"DescribePlacementGroups":       regional("ec2:DescribePlacementGroups"),
		"DescribeLaunchTemplates":       regional("ec2:DescribeLaunchTemplates"),
		"DescribeSecurityGroups":        regional("ec2:DescribeSecurityGroups"),
		"DescribeSpotPriceHistory":      regional("ec2:DescribeSpotPriceHistory"),
		"DescribeSubnets":               regional("ec2:DescribeSubnets"),
		"CreateFleet":                   typed(createFleet),
		"CreateLaunchTemplate":          typed(createLaunchTemplate),
		"DeleteLaunchTemplate":          typed(deleteLaunchTemplate),
		"TerminateInstances":            typed(terminateInstances),
		"RebootInstances":               typed(rebootInstances),
	},
	"SSM": {
		"GetParameter": typed(getParameter),
	},
	"IAM": {
		"GetInstanceProfile":            instanceProfileAction("iam:GetInstanceProfile", false),
		"CreateInstanceProfile":         typed(createInstanceProfile),
		"AddRoleToInstanceProfile":      typed(addRoleToInstanceProfile),
		"RemoveRoleFromInstanceProfile": instanceProfileAction("iam:RemoveRoleFromInstanceProfile", true),
		"DeleteInstanceProfile":         instanceProfileAction("iam:DeleteInstanceProfile", true),
	},
	"EKS": {
		"DescribeCluster": typed(func(c *call, in *eks.DescribeClusterInput) ([]Request, error) {
			return []Request{c.request("eks:DescribeCluster", c.arn("eks", c.region, c.r.opts.AccountID, "cluster/"+aws.ToString(in.Name)))}, nil
		}),
	},
	"Pricing": {
		"GetProducts": typed(func(c *call, _ *pricing.GetProductsInput) ([]Request, error) {
			return []Request{c.request("pricing:GetProducts", "*")}, nil
		}),
	},
	"SQS": {
		"GetQueueUrl": typed(func(c *call, in *sqs.GetQueueUrlInput) ([]Request, error) {
			account := c.r.opts.AccountID
			if in.QueueOwnerAWSAccountId != nil {
				account = *in.QueueOwnerAWSAccountId
			}
			return []Request{c.request("sqs:GetQueueUrl", c.arn("sqs", c.region, account, aws.ToString(in.QueueName)))}, nil
		}),
		"ReceiveMessage": typed(func(c *call, in *sqs.ReceiveMessageInput) ([]Request, error) {
			return c.queueAction("sqs:ReceiveMessage", in.QueueUrl)
		}),
		"DeleteMessage": typed(func(c *call, in *sqs.DeleteMessageInput) ([]Request, error) {
			return c.queueAction("sqs:DeleteMessage", in.QueueUrl)
		}),
	},
}

// typed is a builder for one operation's input type.
func typed[T any](build func(c *call, in T) ([]Request, error)) builder {
	return func(c *call, input any) ([]Request, error) {
		in, ok := input.(T)
		if !ok {
			return nil, fmt.Errorf("unexpected input %T", input)
		}
		return build(c, in)
	}
}

func (c *call) request(action, resource string) Request {
	region := c.region
	if strings.HasPrefix(action, "iam:") {
		region = iamRegion
	}
	return Request{Action: action, Resource: resource, Context: Context{"aws:RequestedRegion": {region}}}
}

func (c *call) arn(service, region, account, resource string) string {
	return fmt.Sprintf("arn:%s:%s:%s:%s:%s", c.r.opts.Partition, service, region, account, resource)
}

func (c *call) ec2ARN(kind, id string) string {
	account := c.r.opts.AccountID
	if kind == "image" || kind == "snapshot" {
		// Public images and their snapshots have no account in their ARN.
		account = ""
	}
	return c.arn("ec2", c.region, account, kind+"/"+id)
}

// regional is a read action that has no resource-level permissions.
func regional(action string) builder {
	return func(c *call, _ any) ([]Request, error) {
		return []Request{c.request(action, "*")}, nil
	}
}

// withRequestTags adds what AWS puts in the context of a request that tags.
func withRequestTags(r Request, tags map[string]string) Request {
	if len(tags) == 0 {
		return r
	}
	keys := make([]string, 0, len(tags))
	for k, v := range tags {
		r.Context["aws:RequestTag/"+k] = []string{v}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	r.Context["aws:TagKeys"] = keys
	return r
}

func withResourceTags(r Request, tags map[string]string) Request {
	for k, v := range tags {
		r.Context["aws:ResourceTag/"+k] = []string{v}
	}
	return r
}

// createdWithTags is the request to create a resource with tags, and the implicit
// ec2:CreateTags AWS authorizes for tags given at creation, whose ec2:CreateAction
// names the creating action.
func (c *call) createdWithTags(action, resource string, tags map[string]string) []Request {
	out := []Request{withRequestTags(c.request(action, resource), tags)}
	if len(tags) > 0 {
		tagging := withRequestTags(c.request("ec2:CreateTags", resource), tags)
		tagging.Context["ec2:CreateAction"] = []string{strings.TrimPrefix(action, "ec2:")}
		out = append(out, tagging)
	}
	return out
}

func tagSpecs(specs []ec2types.TagSpecification) map[string]map[string]string {
	out := map[string]map[string]string{}
	for _, s := range specs {
		tags := out[string(s.ResourceType)]
		if tags == nil {
			tags = map[string]string{}
			out[string(s.ResourceType)] = tags
		}
		for k, v := range ec2Tags(s.Tags) {
			tags[k] = v
		}
	}
	return out
}

// newID stands for the id of a resource a call creates: it has none yet when the
// call is authorized.
const newID = "new"

// createFleet authorizes an instant fleet as EC2 does: the fleet, every resource a
// launch creates (instance, volume, network interface, and the spot request for
// spot), each with its own request tags (the fleet's TagSpecifications of that type,
// else the launch template's) and the implicit CreateTags for them, the launch
// templates (their own tags), the subnets, security groups, images and snapshots it
// launches with, and iam:PassRole for the role of the templates' instance profiles.
func createFleet(c *call, in *ec2.CreateFleetInput) ([]Request, error) {
	fleetTags := tagSpecs(in.TagSpecifications)
	spot := false
	if t := in.TargetCapacitySpecification; t != nil {
		spot = t.DefaultTargetCapacityType == ec2types.DefaultTargetCapacityTypeSpot || aws.ToInt32(t.SpotTargetCapacity) > 0
	}
	created := []string{"instance", "volume", "network-interface"}
	if spot {
		created = append(created, "spot-instances-request")
	}
	out := c.createdWithTags("ec2:CreateFleet", c.ec2ARN("fleet", newID), fleetTags["fleet"])
	used := map[string]bool{}
	use := func(kind, id string) {
		if resource := c.ec2ARN(kind, id); id != "" && !used[resource] {
			used[resource] = true
			out = append(out, c.request("ec2:CreateFleet", resource))
		}
	}
	profiles := map[string]bool{}
	seenCreated := map[string]bool{}
	for i, cfg := range in.LaunchTemplateConfigs {
		spec := cfg.LaunchTemplateSpecification
		if spec == nil {
			return nil, fmt.Errorf("launch template config %d names no launch template", i)
		}
		lt, err := c.launchTemplate(aws.ToString(spec.LaunchTemplateId), aws.ToString(spec.LaunchTemplateName), aws.ToString(spec.Version))
		if err != nil {
			return nil, err
		}
		ltARN := c.ec2ARN("launch-template", lt.ID)
		if !used[ltARN] {
			used[ltARN] = true
			out = append(out, withResourceTags(c.request("ec2:CreateFleet", ltARN), lt.Tags))
		}
		for _, kind := range created {
			tags, ok := fleetTags[kind]
			if !ok {
				tags = lt.TagSpecifications[kind]
			}
			// Templates with the same tags for a kind authorize the same requests.
			key := kind + "\x00" + fmt.Sprint(tags)
			if seenCreated[key] {
				continue
			}
			seenCreated[key] = true
			out = append(out, c.createdWithTags("ec2:CreateFleet", c.ec2ARN(kind, newID), tags)...)
		}
		for _, g := range lt.SecurityGroupIDs {
			use("security-group", g)
		}
		for _, s := range lt.SubnetIDs {
			use("subnet", s)
		}
		for _, s := range lt.SnapshotIDs {
			use("snapshot", s)
		}
		// A launch into a reservation is authorized on the reservation too.
		use("capacity-reservation", lt.CapacityReservationID)
		overrideImages := len(cfg.Overrides) > 0
		for _, o := range cfg.Overrides {
			use("subnet", aws.ToString(o.SubnetId))
			if o.ImageId == nil {
				overrideImages = false
				continue
			}
			use("image", *o.ImageId)
		}
		if !overrideImages {
			use("image", lt.ImageID)
		}
		if lt.InstanceProfileName != "" || lt.InstanceProfileARN != "" {
			profiles[lt.InstanceProfileName+"\x00"+lt.InstanceProfileARN] = true
		}
	}
	for _, key := range sortedKeys(profiles) {
		name, arn, _ := strings.Cut(key, "\x00")
		if name == "" {
			name = arn[strings.LastIndex(arn, "/")+1:]
		}
		pass, err := c.passRole(name)
		if err != nil {
			return nil, err
		}
		out = append(out, pass...)
	}
	return out, nil
}

// passRole is iam:PassRole for the roles of an instance profile a launch uses.
func (c *call) passRole(profile string) ([]Request, error) {
	if c.r.opts.Lookup == nil {
		return nil, fmt.Errorf("instance profile %s: no Lookup to find its role", profile)
	}
	p, err := c.r.opts.Lookup.InstanceProfile(c.ctx, profile)
	if err != nil {
		return nil, err
	}
	if p == nil {
		return nil, fmt.Errorf("instance profile %s does not exist", profile)
	}
	var out []Request
	for _, role := range p.RoleARNs {
		r := c.request("iam:PassRole", role)
		r.Context["iam:PassedToService"] = []string{"ec2.amazonaws.com"}
		out = append(out, r)
	}
	return out, nil
}

// launchTemplate is a template as created through the recorder, else as the lookup
// describes it.
func (c *call) launchTemplate(id, name, version string) (*LaunchTemplate, error) {
	for _, key := range []string{id, name} {
		if key == "" {
			continue
		}
		if lt := c.r.seenTemplate(key); lt != nil {
			return lt, nil
		}
	}
	if c.r.opts.Lookup == nil {
		return nil, fmt.Errorf("launch template %s%s was not created through the recorder, and there is no Lookup", id, name)
	}
	lt, err := c.r.opts.Lookup.LaunchTemplate(c.ctx, id, name, version)
	if err != nil {
		return nil, err
	}
	if lt == nil {
		return nil, fmt.Errorf("launch template %s%s does not exist", id, name)
	}
	return lt, nil
}

func createLaunchTemplate(c *call, in *ec2.CreateLaunchTemplateInput) ([]Request, error) {
	return c.createdWithTags("ec2:CreateLaunchTemplate", c.ec2ARN("launch-template", newID), tagSpecs(in.TagSpecifications)["launch-template"]), nil
}

func deleteLaunchTemplate(c *call, in *ec2.DeleteLaunchTemplateInput) ([]Request, error) {
	id, name := aws.ToString(in.LaunchTemplateId), aws.ToString(in.LaunchTemplateName)
	var lt *LaunchTemplate
	if l := c.r.opts.Lookup; l != nil {
		var err error
		if lt, err = l.LaunchTemplate(c.ctx, id, name, ""); err != nil {
			return nil, err
		}
	} else {
		lt = c.r.seenTemplate(id + name)
	}
	if lt == nil {
		// AWS authorizes a missing template with no tags to go by.
		lt = &LaunchTemplate{ID: id}
		if id == "" {
			lt.ID = "unknown-" + name
		}
	}
	return []Request{withResourceTags(c.request("ec2:DeleteLaunchTemplate", c.ec2ARN("launch-template", lt.ID)), lt.Tags)}, nil
}

func terminateInstances(c *call, in *ec2.TerminateInstancesInput) ([]Request, error) {
	return onInstances(c, "ec2:TerminateInstances", in.InstanceIds)
}

func rebootInstances(c *call, in *ec2.RebootInstancesInput) ([]Request, error) {
	return onInstances(c, "ec2:RebootInstances", in.InstanceIds)
}

// onInstances authorizes the action on each instance, with its tags.
func onInstances(c *call, action string, ids []string) ([]Request, error) {
	if c.r.opts.Lookup == nil {
		return nil, fmt.Errorf("no Lookup to read the tags of instances %v", ids)
	}
	var out []Request
	for _, id := range ids {
		tags, err := c.r.opts.Lookup.InstanceTags(c.ctx, id)
		if err != nil {
			return nil, err
		}
		out = append(out, withResourceTags(c.request(action, c.ec2ARN("instance", id)), tags))
	}
	return out, nil
}

func getParameter(c *call, in *ssm.GetParameterInput) ([]Request, error) {
	name := aws.ToString(in.Name)
	for from, to := range c.r.opts.SSMParameterAliases {
		if rest, ok := strings.CutPrefix(name, from); ok {
			name = to + rest
			break
		}
	}
	account := c.r.opts.AccountID
	if strings.HasPrefix(name, "/aws/service/") {
		// AWS's public parameters belong to no account.
		account = ""
	}
	return []Request{c.request("ssm:GetParameter", c.arn("ssm", c.region, account, "parameter/"+strings.TrimPrefix(name, "/")))}, nil
}

func (c *call) queueAction(action string, queueURL *string) ([]Request, error) {
	u, err := url.Parse(aws.ToString(queueURL))
	if err != nil {
		return nil, fmt.Errorf("parsing queue URL %q, %w", aws.ToString(queueURL), err)
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) != 2 {
		return nil, fmt.Errorf("queue URL %q is not <endpoint>/<account>/<queue>", aws.ToString(queueURL))
	}
	return []Request{c.request(action, c.arn("sqs", c.region, parts[0], parts[1]))}, nil
}

func (c *call) instanceProfileARN(path, name string) string {
	if path == "" {
		path = "/"
	}
	return c.arn("iam", "", c.r.opts.AccountID, "instance-profile"+path+name)
}

// instanceProfile is a profile as authorization sees it: its ARN and tags when it
// exists.
func (c *call) instanceProfile(name string, needTags bool) (string, map[string]string, error) {
	if c.r.opts.Lookup == nil {
		if needTags {
			return "", nil, fmt.Errorf("no Lookup to read the tags of instance profile %s", name)
		}
		return c.instanceProfileARN("", name), nil, nil
	}
	p, err := c.r.opts.Lookup.InstanceProfile(c.ctx, name)
	if err != nil {
		return "", nil, err
	}
	if p == nil {
		return c.instanceProfileARN("", name), nil, nil
	}
	return p.ARN, p.Tags, nil
}

func instanceProfileAction(action string, resourceTags bool) builder {
	return func(c *call, input any) ([]Request, error) {
		var name string
		switch in := input.(type) {
		case *iam.GetInstanceProfileInput:
			name = aws.ToString(in.InstanceProfileName)
		case *iam.RemoveRoleFromInstanceProfileInput:
			name = aws.ToString(in.InstanceProfileName)
		case *iam.DeleteInstanceProfileInput:
			name = aws.ToString(in.InstanceProfileName)
		default:
			return nil, fmt.Errorf("unexpected input %T for %s", input, action)
		}
		arn, tags, err := c.instanceProfile(name, resourceTags)
		if err != nil {
			return nil, err
		}
		r := c.request(action, arn)
		if resourceTags {
			r = withResourceTags(r, tags)
		}
		return []Request{r}, nil
	}
}

// createInstanceProfile is iam:CreateInstanceProfile and, for the tags given with
// it, iam:TagInstanceProfile, on the profile as it will be: carrying those tags.
// (Karpenter's policy scopes TagInstanceProfile by the profile's own tags and its
// controller creates profiles with tags, which works only if tagging on create is
// either not authorized separately or authorized on the tags being set.)
func createInstanceProfile(c *call, in *iam.CreateInstanceProfileInput) ([]Request, error) {
	arn := c.instanceProfileARN(aws.ToString(in.Path), aws.ToString(in.InstanceProfileName))
	tags := iamTags(in.Tags)
	out := []Request{withRequestTags(c.request("iam:CreateInstanceProfile", arn), tags)}
	if len(tags) > 0 {
		out = append(out, withResourceTags(withRequestTags(c.request("iam:TagInstanceProfile", arn), tags), tags))
	}
	return out, nil
}

// addRoleToInstanceProfile also needs iam:PassRole on the role: whoever may put a
// role in a profile may hand it to any instance launched with the profile.
func addRoleToInstanceProfile(c *call, in *iam.AddRoleToInstanceProfileInput) ([]Request, error) {
	arn, tags, err := c.instanceProfile(aws.ToString(in.InstanceProfileName), true)
	if err != nil {
		return nil, err
	}
	role := aws.ToString(in.RoleName)
	roleARN := c.arn("iam", "", c.r.opts.AccountID, "role/"+role)
	if l := c.r.opts.Lookup; l != nil {
		found, err := l.RoleARN(c.ctx, role)
		if err != nil {
			return nil, err
		}
		if found != "" {
			roleARN = found
		}
	}
	pass := c.request("iam:PassRole", roleARN)
	pass.Context["iam:PassedToService"] = []string{"ec2.amazonaws.com"}
	return []Request{withResourceTags(c.request("iam:AddRoleToInstanceProfile", arn), tags), pass}, nil
}

func iamTags(tags []iamtypes.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range tags {
		out[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return out
}
