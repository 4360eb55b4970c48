package nodeclass_test

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	ssmtypes "github.com/aws/aws-sdk-go-v2/service/ssm/types"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

const testPrefix = "/dovetail-test/service"

func TestResolveAMIs(t *testing.T) {
	if testing.Short() {
		t.Skip("starts moto_server")
	}
	ctx := context.Background()
	clients := testenv.AWSClients(t, testenv.StartMoto(t), "us-west-2")
	// moto does not record the architecture of images registered through
	// RegisterImage, which real EC2 always reports; its preloaded images carry one.
	preloaded := func(arch ec2types.ArchitectureValues, skip string) ec2types.Image {
		out, err := clients.EC2.DescribeImages(ctx, &ec2.DescribeImagesInput{Filters: []ec2types.Filter{{Name: aws.String("architecture"), Values: []string{string(arch)}}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, img := range out.Images {
			if aws.ToString(img.ImageId) != skip && aws.ToString(img.Name) != "" {
				return img
			}
		}
		t.Fatalf("the emulator has no %s image", arch)
		return ec2types.Image{}
	}
	amdImage, armImage := preloaded(ec2types.ArchitectureValuesX8664, ""), preloaded(ec2types.ArchitectureValuesArm64, "")
	amd, arm := aws.ToString(amdImage.ImageId), aws.ToString(armImage.ImageId)
	customImage := preloaded(ec2types.ArchitectureValuesX8664, amd)
	custom, customName := aws.ToString(customImage.ImageId), aws.ToString(customImage.Name)
	if _, err := clients.EC2.CreateTags(ctx, &ec2.CreateTagsInput{Resources: []string{custom}, Tags: []ec2types.Tag{{Key: aws.String("team"), Value: aws.String("platform")}}}); err != nil {
		t.Fatal(err)
	}
	seed := func(name, value string) {
		if _, err := clients.SSM.PutParameter(ctx, &ssm.PutParameterInput{Name: aws.String(name), Value: aws.String(value), Type: ssmtypes.ParameterTypeString}); err != nil {
			t.Fatal(err)
		}
	}
	seed(testPrefix+"/eks/optimized-ami/1.33/amazon-linux-2023/x86_64/standard/recommended/image_id", amd)
	seed(testPrefix+"/eks/optimized-ami/1.33/amazon-linux-2023/arm64/standard/recommended/image_id", arm)
	seed("/platform/golden-ami", custom)
	resolver := &nodeclass.AMIResolver{EC2: clients.EC2, SSM: clients.SSM, SSMPrefix: testPrefix, KubernetesVersion: "1.33"}

	cases := []struct {
		name  string
		terms []awsv1.AMISelectorTerm
		want  map[string]string // arch -> image
		err   string
	}{
		{"alias latest gives both architectures", []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}, map[string]string{"amd64": amd, "arm64": arm}, ""},
		{"pinned alias without a published image", []awsv1.AMISelectorTerm{{Alias: "al2023@v20200101"}}, nil, "no image matches amiSelectorTerms [alias al2023@v20200101]"},
		{"ssm parameter", []awsv1.AMISelectorTerm{{SSMParameter: "/platform/golden-ami"}}, map[string]string{"amd64": custom}, ""},
		{"name", []awsv1.AMISelectorTerm{{Name: customName}}, map[string]string{"amd64": custom}, ""},
		{"tags", []awsv1.AMISelectorTerm{{Tags: map[string]string{"team": "platform"}}}, map[string]string{"amd64": custom}, ""},
		{"id", []awsv1.AMISelectorTerm{{ID: arm}}, map[string]string{"arm64": arm}, ""},
		{"unknown id", []awsv1.AMISelectorTerm{{ID: "ami-0000deadbeef"}}, nil, "no image matches"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolver.Resolve(ctx, tc.terms)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			have := map[string]string{}
			for _, ami := range got {
				have[ami.Requirements[0].Values[0]] = ami.ID
			}
			if len(have) != len(tc.want) {
				t.Fatalf("resolved %v, want %v", have, tc.want)
			}
			for arch, id := range tc.want {
				if have[arch] != id {
					t.Errorf("%s image = %s, want %s", arch, have[arch], id)
				}
			}
		})
	}
}
