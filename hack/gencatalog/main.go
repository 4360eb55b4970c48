// Command gencatalog builds the embedded AWS catalog (controller/catalog/aws.json)
// from the EC2 emulator's own DescribeInstanceTypes data (moto's bundled instance
// type and offering files, the same answers moto_server gives) joined with the
// generated on-demand price table. Types without a price are left out: a plan must
// never show a price it does not know.
package main

import (
	"compress/gzip"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	"github.com/dovetail-sh/dovetail/controller/catalog"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/pricing"
)

func main() {
	out := flag.String("o", "aws.json", "output file")
	region := flag.String("region", "us-east-1", "region whose offerings and prices to use")
	zones := flag.String("zones", "us-east-1a,us-east-1b,us-east-1c", "zones to offer each type in")
	flag.Parse()
	if err := run(*out, *region, strings.Split(*zones, ",")); err != nil {
		log.Fatalf("gencatalog: %v", err)
	}
}

func run(out, region string, zones []string) error {
	dir, err := motoResources()
	if err != nil {
		return err
	}
	var infos map[string]ec2types.InstanceTypeInfo
	if err := readGzipJSON(filepath.Join(dir, "instance_types.json.gz"), &infos); err != nil {
		return err
	}
	var offerings []struct{ InstanceType, Location string }
	if err := readGzipJSON(filepath.Join(dir, "instance_type_offerings", "availability-zone", region+".json.gz"), &offerings); err != nil {
		return err
	}
	offered := map[string][]string{}
	for _, o := range offerings {
		if slices.Contains(zones, o.Location) {
			offered[o.InstanceType] = append(offered[o.InstanceType], o.Location)
		}
	}
	f := &catalog.File{}
	for name, info := range infos {
		price, ok, _ := pricing.OnDemand(region, name)
		if !ok || len(offered[name]) == 0 {
			continue
		}
		z := offered[name]
		slices.Sort(z)
		if e, ok := aws.CatalogEntry(info, z, price, aws.ENIMaxPods(info, 0)); ok {
			f.InstanceTypes = append(f.InstanceTypes, e)
		}
	}
	w, err := os.Create(out)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := catalog.Write(w, f); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "gencatalog: wrote %d instance types to %s\n", len(f.InstanceTypes), out)
	return nil
}

// motoResources finds moto's EC2 resource files through the Python that has moto.
func motoResources() (string, error) {
	raw, err := exec.Command("python3", "-c", "import moto, os; print(os.path.dirname(moto.__file__))").Output()
	if err != nil {
		return "", fmt.Errorf("locating moto (python3 -c 'import moto'), the EC2 emulator whose data the catalog is built from: %w", err)
	}
	return filepath.Join(strings.TrimSpace(string(raw)), "ec2", "resources"), nil
}

func readGzipJSON(path string, v any) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return fmt.Errorf("reading %s, %w", path, err)
	}
	raw, err := io.ReadAll(gz)
	if err != nil {
		return fmt.Errorf("reading %s, %w", path, err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("decoding %s, %w", path, err)
	}
	return nil
}
