// Command iamdocs writes docs/iam.md from the controller's IAM policy
// (provider.ControllerPolicy): every action, the statement granting it, the
// controller code that calls it, and why. It fails when the policy grants an
// action this file gives no reason for, when a reason names an action the policy
// lacks, when no controller code calls an action that is not marked as used on the
// controller's behalf, or when controller code calls an action the policy does not
// grant: the page, the policy and the code cannot drift apart unnoticed (make
// generate runs it; verify-generate fails on a diff).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/dovetail-sh/dovetail/provider"
)

// reason is why the controller needs an action. implied names the call that
// needs it when the controller does not call it itself (EC2 authorizes a fleet's
// RunInstances, tag-on-create and PassRole against the caller).
type reason struct {
	why     string
	implied string
}

var reasons = map[string]reason{
	"ec2:CreateFleet":                   {why: "launches a NodeClaim's instance: an instant fleet over the claim's types, zones and capacity types"},
	"ec2:RunInstances":                  {why: "the instances of that fleet", implied: "CreateFleet (EC2 authorizes the fleet's launches as RunInstances of the caller)"},
	"ec2:CreateTags":                    {why: "tags instances, volumes, interfaces and launch templates as they are created (cluster, nodepool, nodeclaim)", implied: "CreateFleet and CreateLaunchTemplate (tag-on-create)"},
	"ec2:CreateLaunchTemplate":          {why: "one launch template per EC2NodeClass, AMI and user data"},
	"ec2:DeleteLaunchTemplate":          {why: "removes the launch templates of classes and AMIs no longer used"},
	"ec2:DescribeLaunchTemplates":       {why: "finds the launch templates it made, after a restart too"},
	"ec2:TerminateInstances":            {why: "terminates a NodeClaim's instance once its node is drained, or an instance no NodeClaim owns (garbage collection)"},
	"ec2:RebootInstances":               {why: "repair policies that reboot an unhealthy node in place"},
	"ec2:DescribeInstances":             {why: "the state of launched instances (registration, garbage collection), and which instance profiles running instances still use before one is deleted"},
	"ec2:DescribeInstanceStatus":        {why: "scheduled maintenance events, drained ahead as interruptions"},
	"ec2:DescribeInstanceTypes":         {why: "the region's instance types: the catalog it plans with"},
	"ec2:DescribeInstanceTypeOfferings": {why: "which zones offer each type"},
	"ec2:DescribeSpotPriceHistory":      {why: "spot prices per type and zone"},
	"ec2:DescribeCapacityReservations":  {why: "an EC2NodeClass's capacityReservationSelectorTerms, and reserved offerings"},
	"ec2:DescribeImages":                {why: "an EC2NodeClass's amiSelectorTerms"},
	"ec2:DescribePlacementGroups":       {why: "an EC2NodeClass's placement group"},
	"ec2:DescribeSecurityGroups":        {why: "an EC2NodeClass's securityGroupSelectorTerms"},
	"ec2:DescribeSubnets":               {why: "an EC2NodeClass's subnetSelectorTerms, their zones and zone IDs"},
	"ssm:GetParameter":                  {why: "the EKS-optimized AMI IDs an amiSelectorTerms alias names, and the ssmParameter terms given"},
	"pricing:GetProducts":               {why: "on-demand prices (never called with settings.isolatedVPC: the embedded table is used)"},
	"iam:PassRole":                      {why: "the node role, to EC2 only, in the instance profiles of launched instances", implied: "CreateFleet and AddRoleToInstanceProfile"},
	"iam:CreateInstanceProfile":         {why: "an instance profile per EC2NodeClass that names a role"},
	"iam:AddRoleToInstanceProfile":      {why: "puts the class's role in its instance profile"},
	"iam:RemoveRoleFromInstanceProfile": {why: "takes an old role out when the class's role changes, and before deleting a profile"},
	"iam:DeleteInstanceProfile":         {why: "removes a deleted class's instance profile, and retired profiles no instance uses"},
	"iam:TagInstanceProfile":            {why: "tags instance profiles as they are created (cluster, region, class)", implied: "CreateInstanceProfile (tag-on-create)"},
	"iam:GetInstanceProfile":            {why: "reads an instance profile's role and whether it exists"},
	"eks:DescribeCluster":               {why: "the API server endpoint, CA bundle and service CIDR for node user data, when the settings do not give them"},
	"sqs:GetQueueUrl":                   {why: "the interruption queue's URL from its name"},
	"sqs:ReceiveMessage":                {why: "spot interruption, rebalance, scheduled change and instance state events"},
	"sqs:DeleteMessage":                 {why: "removes each event once handled"},
	"kms:Decrypt":                       {why: "reads messages of an interruption queue encrypted with a customer managed key (only through SQS)", implied: "ReceiveMessage on an encrypted queue"},
}

func main() {
	out := flag.String("o", "docs/iam.md", "the page to write")
	root := flag.String("root", ".", "the repository, whose controller/ is searched for calls")
	flag.Parse()
	page, err := render(*root)
	if err != nil {
		log.Fatalf("iamdocs: %v", err)
	}
	if err := os.WriteFile(*out, []byte(page), 0o644); err != nil {
		log.Fatalf("iamdocs: %v", err)
	}
}

type statement struct {
	Sid      string
	Action   []string
	Resource []string
}

func render(root string) (string, error) {
	// Every optional statement in: a queue, its key, a parameter of the user's.
	doc, err := provider.ControllerPolicy(provider.ControllerPolicyInput{Region: "REGION", AccountID: "111122223333", ClusterName: "CLUSTER",
		NodeRoleARN: "arn:aws:iam::111122223333:role/NODE_ROLE", InterruptionQueueARN: "arn:aws:sqs:REGION:111122223333:QUEUE",
		InterruptionQueueKMSKey: "alias/QUEUE_KEY", AMISSMParameterARNs: []string{"arn:aws:ssm:REGION:111122223333:parameter/AMI/*"}})
	if err != nil {
		return "", err
	}
	var policy struct{ Statement []statement }
	if err := json.Unmarshal([]byte(doc), &policy); err != nil {
		return "", err
	}
	callers, err := callSites(filepath.Join(root, "controller"))
	if err != nil {
		return "", err
	}
	granted := map[string][]string{}
	var actions []string
	for _, s := range policy.Statement {
		for _, a := range s.Action {
			if _, ok := granted[a]; !ok {
				actions = append(actions, a)
			}
			granted[a] = append(granted[a], s.Sid)
		}
	}
	var problems []string
	for a := range reasons {
		if _, ok := granted[a]; !ok {
			problems = append(problems, a+" has a reason here but the policy does not grant it")
		}
	}
	var b strings.Builder
	b.WriteString(`# The controller's IAM permissions

<!-- Generated by hack/iamdocs from provider.ControllerPolicy (make generate); do not edit. -->

The policy ` + "`dovetail_controller_role`" + ` attaches and ` + "`data.dovetail_controller_policy`" + ` renders: read
actions limited to the cluster's region, every write scoped by the tags the controller puts
on what it creates, ` + "`iam:PassRole`" + ` for the node role only, SQS and KMS only for the
interruption queue and its key when given. Each action below is granted by the statement
named, called from the code listed (or needed by a call EC2 or SQS makes on the controller's
behalf), for the reason given. The e2e tests run the controller against the emulator with
every request checked against this policy (` + "`tests/iampolicy`" + `).

| Action | Statement | Called from | Why |
|---|---|---|---|
`)
	for _, a := range actions {
		r, ok := reasons[a]
		if !ok {
			problems = append(problems, a+" is granted but has no reason in hack/iamdocs")
			continue
		}
		from := strings.Join(callers[a], ", ")
		switch {
		case from == "" && r.implied == "":
			problems = append(problems, a+": no controller code calls it and no call needs it on the controller's behalf")
		case from == "":
			from = "needed by " + r.implied
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", a, strings.Join(granted[a], ", "), from, r.why)
	}
	for a := range callers {
		if _, ok := granted[a]; !ok {
			problems = append(problems, a+" is called by "+strings.Join(callers[a], ", ")+" but the policy does not grant it")
		}
	}
	if len(problems) > 0 {
		slices.Sort(problems)
		return "", fmt.Errorf("the policy and this page disagree:\n%s", strings.Join(problems, "\n"))
	}
	return b.String(), nil
}

// callSites are the files under dir, tests left out, that call each AWS API
// operation, by IAM action ("ec2:DescribeInstances"): a call builds its SDK input
// (&ec2.DescribeInstancesInput{...}), so a wrapper of the same name is not taken
// for one.
func callSites(dir string) (map[string][]string, error) {
	call := regexp.MustCompile(`\b(ec2|iam|ssm|sqs|eks|awspricing)\.([A-Z][A-Za-z0-9]+)Input\{`)
	out := map[string][]string{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(filepath.Dir(dir), path)
		if err != nil {
			return err
		}
		for _, m := range call.FindAllStringSubmatch(string(src), -1) {
			action := strings.TrimPrefix(m[1], "aws") + ":" + m[2]
			if !slices.Contains(out[action], "`"+rel+"`") {
				out[action] = append(out[action], "`"+rel+"`")
			}
		}
		return nil
	})
	for _, files := range out {
		slices.Sort(files)
	}
	return out, err
}
