package provider_test

import (
	"fmt"
	"regexp"
	"strconv"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"

	"github.com/dovetail-sh/dovetail/tests/testenv"
)

func instanceTypesConfig(endpoint, filters string) string {
	return awsProvider(endpoint, "ec2") + `
data "dovetail_instance_types" "this" {
` + filters + `
}
`
}

// checkInstanceTypes checks every returned type against a predicate on its
// attributes, that there is at least one, and that they come cheapest first.
func checkInstanceTypes(ok func(attrs map[string]string, i int) error) resource.TestCheckFunc {
	return func(s *terraform.State) error {
		rs := s.RootModule().Resources["data.dovetail_instance_types.this"]
		if rs == nil {
			return fmt.Errorf("no data source in state")
		}
		attrs := rs.Primary.Attributes
		n, _ := strconv.Atoi(attrs["instance_types.#"])
		if n == 0 {
			return fmt.Errorf("no instance type matched")
		}
		prev := -1.0
		for i := range n {
			price, _ := strconv.ParseFloat(attrs[fmt.Sprintf("instance_types.%d.price", i)], 64)
			if price < prev {
				return fmt.Errorf("instance_types.%d costs %v after one at %v: not cheapest first", i, price, prev)
			}
			prev = price
			if attrs[fmt.Sprintf("names.%d", i)] != attrs[fmt.Sprintf("instance_types.%d.name", i)] {
				return fmt.Errorf("names.%d and instance_types.%d.name differ", i, i)
			}
			if err := ok(attrs, i); err != nil {
				return err
			}
		}
		return nil
	}
}

func TestAccInstanceTypesDataSource(t *testing.T) {
	acceptance(t)
	moto := testenv.StartMoto(t)
	testenv.AWSClients(t, moto, "us-west-2")
	field := func(attrs map[string]string, i int, name string) string {
		return attrs[fmt.Sprintf("instance_types.%d.%s", i, name)]
	}
	resource.Test(t, resource.TestCase{
		ProtoV6ProviderFactories: factories,
		Steps: []resource.TestStep{
			{
				Config:      instanceTypesConfig(moto.Endpoint, "  vcpus_min = 16\n  vcpus_max = 8"),
				ExpectError: regexp.MustCompile(`vcpus_min \(16\) is above vcpus_max \(8\)`),
			},
			{
				Config: instanceTypesConfig(moto.Endpoint, `
  vcpus_min      = 4
  vcpus_max      = 8
  memory_gib_min = 16
  architectures  = ["arm64"]
  families       = ["m6g", "m7g", "r6g"]
  max_price      = 1
  gpus_max       = 0`),
				Check: checkInstanceTypes(func(attrs map[string]string, i int) error {
					vcpus, _ := strconv.Atoi(field(attrs, i, "vcpus"))
					mem, _ := strconv.ParseFloat(field(attrs, i, "memory_gib"), 64)
					price, _ := strconv.ParseFloat(field(attrs, i, "price"), 64)
					fam := field(attrs, i, "family")
					if vcpus < 4 || vcpus > 8 || mem < 16 || field(attrs, i, "architecture") != "arm64" || price > 1 || price <= 0 ||
						(fam != "m6g" && fam != "m7g" && fam != "r6g") || field(attrs, i, "gpus") != "0" {
						return fmt.Errorf("instance_types.%d = %s: %d vCPU, %v GiB, %s, %s, $%v", i, field(attrs, i, "name"), vcpus, mem, field(attrs, i, "architecture"), fam, price)
					}
					return nil
				}),
			},
			{
				Config: instanceTypesConfig(moto.Endpoint, `
  gpus_min          = 1
  gpu_manufacturers = ["nvidia"]
  capacity_type     = "spot"`),
				Check: checkInstanceTypes(func(attrs map[string]string, i int) error {
					if field(attrs, i, "gpu_manufacturer") != "nvidia" || field(attrs, i, "gpus") == "0" || field(attrs, i, "zones.#") == "0" {
						return fmt.Errorf("instance_types.%d = %s with %s %s GPUs in %s zones", i, field(attrs, i, "name"), field(attrs, i, "gpus"), field(attrs, i, "gpu_manufacturer"), field(attrs, i, "zones.#"))
					}
					return nil
				}),
			},
		},
	})
}
