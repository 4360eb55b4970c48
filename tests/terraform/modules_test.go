package terraform_test

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/dovetail-sh/dovetail/tests/localstack"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// Bad module inputs fail the plan with the variable's message, before anything is
// made; no server is needed (nor reached: the provider points at nothing).
func TestModuleInputValidation(t *testing.T) {
	if testing.Short() {
		t.Skip("runs terraform")
	}
	ctx := context.Background()
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	providerDir := filepath.Join(work, "provider")
	must(t, localstack.BuildProvider(ctx, root, providerDir))
	must(t, localstack.CopyConfigurations(root, work))

	bootstrap := `source = "../../modules/dovetail"
  region = "us-west-2"
`
	pools := `source = "../../modules/node-pools"
  cluster_name = "demo"
`
	cases := map[string]struct{ module, want string }{
		"cluster name": {bootstrap + `cluster_name = "my cluster"`, `cluster_name must be an EKS cluster name`},
		"region":       {`source = "../../modules/dovetail"` + "\n" + `cluster_name = "demo"` + "\n" + `region = "US West"`, `region must be an AWS region name such as us-west-2`},
		"capacity type": {bootstrap + `cluster_name = "demo"
  default_node_pool = { capacity_types = ["preemptible"] }`, `default_node_pool.capacity_types must list spot, on-demand or reserved`},
		"consolidate after": {bootstrap + `cluster_name = "demo"
  default_node_pool = { consolidate_after = "soon" }`, `consolidate_after must be a duration such as 30s`},
		"subnet ids": {bootstrap + `cluster_name = "demo"
  subnet_ids = ["10.0.1.0/24"]`, `subnet_ids must be subnet IDs \(subnet-...\)`},
		"queue kms reuse period": {bootstrap + `cluster_name = "demo"
  queue_kms_master_key_id = "alias/q"
  queue_kms_data_key_reuse_period_seconds = 10`, `queue_kms_data_key_reuse_period_seconds must be between 60 and 86400`},
		"role path": {bootstrap + `cluster_name = "demo"
  iam_role_path = "dovetail"`, `iam_role_path must begin and end with /`},
		"node role boundary": {bootstrap + `cluster_name = "demo"
  node_iam_role_permissions_boundary = "arn:aws:iam::123456789012:role/x"`, `node_iam_role_permissions_boundary must be an IAM policy ARN`},
		"log level": {bootstrap + `cluster_name = "demo"
  controller = { log_level = "verbose" }`, `controller.log_level must be debug, info or error`},
		"node role ARN while creating one": {bootstrap + `cluster_name = "demo"
  node_role_arn = "arn:aws:iam::123456789012:role/Karpenter-demo"
  controller = { image = "` + testenv.ControllerImage + `" }`, `node_role_arn names an existing node role: set create_node_role = false with it`},
		"node role name, not ARN": {bootstrap + `cluster_name = "demo"
  create_node_role = false
  node_role_arn = "Karpenter-demo"`, `node_role_arn must be an IAM role ARN`},
		"instance profile without node role": {bootstrap + `cluster_name = "demo"
  create_node_role = false
  account_id = "123456789012"
  node_class_uses_instance_profile = true
  controller = { image = "` + testenv.ControllerImage + `" }`, `node_class_uses_instance_profile needs create_node_role = true`},
		"access entry type": {bootstrap + `cluster_name = "demo"
  access_entry_type = "STANDARD"`, `access_entry_type must be EC2_LINUX or EC2_WINDOWS`},
		"ip family": {bootstrap + `cluster_name = "demo"
  cluster_ip_family = "dual"`, `cluster_ip_family must be ipv4 or ipv6`},
		"ipv6 without account": {bootstrap + `cluster_name = "demo"
  cluster_ip_family = "ipv6"`, `cluster_ip_family = "ipv6" needs account_id`},
		"role and instance profile": {pools + `node_classes = { a = { role = "r", instance_profile = "p" } }`, `exactly one of role and instance_profile`},
		"taint effect": {pools + `node_pools = { a = { node_class = "a", taints = [{ key = "k", effect = "NoScheduleNow" }] } }`,
			`effect must be NoSchedule, PreferNoSchedule or NoExecute`},
		"operator": {pools + `node_pools = { a = { node_class = "a", requirements = [{ key = "kubernetes.io/arch", operator = "Equals", values = ["arm64"] }] } }`,
			`operator must be In, NotIn, Exists, DoesNotExist, Gt or Lt`},
		"pool name": {pools + `node_pools = { GPU = { node_class = "a" } }`, `node_pools keys are object names`},
		"no route tables": {`source = "../../modules/private-cluster"
  cluster_name = "demo"
  region = "us-west-2"
  vpc_id = "vpc-0123456789abcdef0"
  endpoint_subnet_ids = ["subnet-0123456789abcdef0"]
  route_table_ids = []`, `without the S3 gateway endpoint nodes cannot pull images`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(work, "cases", regexp.MustCompile(`\W+`).ReplaceAllString(name, "-"))
			must(t, os.MkdirAll(dir, 0o755))
			config := `provider "dovetail" {
  aws {
    region = "us-west-2"
  }
  kubernetes {
    host = "https://127.0.0.1:1"
  }
}
terraform {
  required_providers {
    dovetail = { source = "dovetail-sh/dovetail" }
  }
}
module "m" {
  ` + c.module + `
}
`
			must(t, os.WriteFile(filepath.Join(dir, "main.tf"), []byte(config), 0o644))
			tf, err := localstack.NewTerraform(dir, providerDir, "AWS_ACCESS_KEY_ID=testing", "AWS_SECRET_ACCESS_KEY=testing",
				"AWS_ENDPOINT_URL=http://127.0.0.1:1", "AWS_EC2_METADATA_DISABLED=true")
			must(t, err)
			must(t, tf.Init(ctx))
			out, err := tf.Run(ctx, "plan", "-no-color")
			if err == nil {
				t.Fatalf("the plan succeeded; want an error matching %q:\n%s", c.want, out)
			}
			if !regexp.MustCompile(c.want).MatchString(regexp.MustCompile(`\s+`).ReplaceAllString(out, " ")) {
				t.Fatalf("the plan failed without %q:\n%s", c.want, out)
			}
		})
	}
}
