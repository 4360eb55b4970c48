package nodeclass

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/userdata"
)

// DefaultSSMPrefix is where AWS publishes the EKS-optimized image parameters.
const DefaultSSMPrefix = "/aws/service"

// ImageAPI is the part of EC2 image resolution uses.
type ImageAPI interface {
	DescribeImages(context.Context, *ec2.DescribeImagesInput, ...func(*ec2.Options)) (*ec2.DescribeImagesOutput, error)
}

// SSMAPI is the part of SSM image resolution uses.
type SSMAPI interface {
	GetParameter(context.Context, *ssm.GetParameterInput, ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// AMIResolver resolves amiSelectorTerms. The SSM prefix is a setting: the emulator
// has no EKS parameters, and AWS reserves /aws for itself, so tests seed their own.
type AMIResolver struct {
	EC2               ImageAPI
	SSM               SSMAPI
	SSMPrefix         string
	KubernetesVersion string
}

var ec2Arch = map[string]string{v1.ArchitectureAmd64: "x86_64", v1.ArchitectureArm64: "arm64"}

// aliasParameters returns the SSM parameter per architecture for family@version.
func (r *AMIResolver) aliasParameters(alias string) (map[string]string, error) {
	family, version, ok := strings.Cut(alias, "@")
	if !ok {
		return nil, fmt.Errorf("alias %q is not family@version", alias)
	}
	prefix, k8s := strings.TrimSuffix(r.SSMPrefix, "/"), r.KubernetesVersion
	out := map[string]string{}
	for _, arch := range []string{v1.ArchitectureAmd64, v1.ArchitectureArm64} {
		a := ec2Arch[arch]
		switch family {
		case "al2023":
			if version == "latest" {
				out[arch] = fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/recommended/image_id", prefix, k8s, a)
			} else {
				out[arch] = fmt.Sprintf("%s/eks/optimized-ami/%s/amazon-linux-2023/%s/standard/amazon-eks-node-al2023-%s-standard-%s-%s/image_id", prefix, k8s, a, a, k8s, version)
			}
		case "al2":
			name := "amazon-linux-2"
			if arch == v1.ArchitectureArm64 {
				name += "-arm64"
			}
			if version == "latest" {
				out[arch] = fmt.Sprintf("%s/eks/optimized-ami/%s/%s/recommended/image_id", prefix, k8s, name)
			} else {
				out[arch] = fmt.Sprintf("%s/eks/optimized-ami/%s/%s/amazon-eks-node-%s-%s/image_id", prefix, k8s, name, k8s, version)
			}
		case "bottlerocket":
			out[arch] = fmt.Sprintf("%s/bottlerocket/aws-k8s-%s/%s/%s/image_id", prefix, k8s, a, strings.TrimPrefix(version, "v"))
		case "windows2019", "windows2022", "windows2025":
			// Server Core, amd64 only; Windows images are not pinned to a version.
			if version != "latest" {
				return nil, fmt.Errorf("alias %q: windows families may only specify version 'latest'", alias)
			}
			if arch == v1.ArchitectureAmd64 {
				year := strings.TrimPrefix(family, "windows")
				out[arch] = fmt.Sprintf("%s/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", prefix, year, k8s)
			}
		default:
			return nil, fmt.Errorf("alias family %q is not one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", family)
		}
	}
	return out, nil
}

// Resolve returns the newest image per architecture the terms select.
func (r *AMIResolver) Resolve(ctx context.Context, terms []awsv1.AMISelectorTerm) ([]awsv1.AMI, error) {
	var images []ec2types.Image
	var ids []string
	for _, term := range terms {
		switch {
		case term.Alias != "":
			params, err := r.aliasParameters(term.Alias)
			if err != nil {
				return nil, err
			}
			for _, name := range params {
				id, err := r.parameter(ctx, name)
				if err != nil {
					continue // an alias need not publish every architecture
				}
				ids = append(ids, id)
			}
		case term.SSMParameter != "":
			id, err := r.parameter(ctx, term.SSMParameter)
			if err != nil {
				return nil, fmt.Errorf("reading ssmParameter %q, %w", term.SSMParameter, err)
			}
			ids = append(ids, id)
		default:
			in := &ec2.DescribeImagesInput{Filters: tagFilters(term.Tags)}
			if term.ID != "" {
				in.ImageIds = []string{term.ID}
			}
			if term.Name != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("name"), Values: []string{term.Name}})
			}
			if term.Owner != "" {
				in.Owners = []string{term.Owner}
			}
			found, err := r.describe(ctx, in)
			if err != nil {
				return nil, err
			}
			images = append(images, found...)
		}
	}
	if len(ids) > 0 {
		found, err := r.describe(ctx, &ec2.DescribeImagesInput{ImageIds: ids})
		if err != nil {
			return nil, err
		}
		images = append(images, found...)
	}
	newest := map[string]ec2types.Image{}
	for _, img := range images {
		arch := kubeArch(img.Architecture)
		if arch == "" {
			continue
		}
		if cur, ok := newest[arch]; !ok || aws.ToString(img.CreationDate) > aws.ToString(cur.CreationDate) {
			newest[arch] = img
		}
	}
	if len(newest) == 0 {
		return nil, fmt.Errorf("no image matches amiSelectorTerms %s; check the alias and the cluster's Kubernetes version %s, or the image ids, names, tags and owners", describeAMITerms(terms), r.KubernetesVersion)
	}
	// A Windows alias's images boot Windows of one build: nodes of them carry the
	// labels pods select Windows by.
	var windows []awsv1.AMIRequirement
	for _, term := range terms {
		if f, ok := userdata.FamilyOfAlias(term.Alias); ok && userdata.IsWindows(f) {
			windows = []awsv1.AMIRequirement{{Key: v1.LabelOS, Operator: string(v1.OpIn), Values: []string{"windows"}},
				{Key: v1.LabelWindowsBuild, Operator: string(v1.OpIn), Values: []string{userdata.WindowsBuilds[f]}}}
		}
	}
	out := make([]awsv1.AMI, 0, len(newest))
	for arch, img := range newest {
		out = append(out, awsv1.AMI{ID: aws.ToString(img.ImageId), Name: aws.ToString(img.Name),
			Requirements: append([]awsv1.AMIRequirement{{Key: v1.LabelArch, Operator: string(v1.OpIn), Values: []string{arch}}}, windows...)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Requirements[0].Values[0] < out[j].Requirements[0].Values[0] })
	return out, nil
}

func (r *AMIResolver) parameter(ctx context.Context, name string) (string, error) {
	out, err := r.SSM.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	if err != nil {
		return "", err
	}
	return aws.ToString(out.Parameter.Value), nil
}

func (r *AMIResolver) describe(ctx context.Context, in *ec2.DescribeImagesInput) ([]ec2types.Image, error) {
	out, err := r.EC2.DescribeImages(ctx, in)
	if err != nil {
		if len(in.ImageIds) > 0 && strings.Contains(err.Error(), "NotFound") {
			return nil, nil
		}
		return nil, fmt.Errorf("describing images, %w", err)
	}
	return out.Images, nil
}

func kubeArch(a ec2types.ArchitectureValues) string {
	switch a {
	case ec2types.ArchitectureValuesX8664:
		return v1.ArchitectureAmd64
	case ec2types.ArchitectureValuesArm64:
		return v1.ArchitectureArm64
	}
	return ""
}

func describeAMITerms(terms []awsv1.AMISelectorTerm) string {
	parts := make([]string, 0, len(terms))
	for _, t := range terms {
		switch {
		case t.Alias != "":
			parts = append(parts, "alias "+t.Alias)
		case t.SSMParameter != "":
			parts = append(parts, "ssmParameter "+t.SSMParameter)
		case t.ID != "":
			parts = append(parts, "id "+t.ID)
		case t.Name != "":
			parts = append(parts, "name "+t.Name)
		default:
			parts = append(parts, "tags "+formatTags(t.Tags))
		}
	}
	return "[" + strings.Join(parts, "; ") + "]"
}
