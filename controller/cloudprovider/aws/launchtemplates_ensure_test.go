package aws

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	clocktesting "k8s.io/utils/clock/testing"
)

// templateCounter keeps launch templates by name as EC2 does, answering slowly
// enough for concurrent callers to overlap, and counts the calls.
type templateCounter struct {
	mu                 sync.Mutex
	describes, creates int
	templates          map[string]bool
}

func (c *templateCounter) DescribeLaunchTemplates(_ context.Context, in *ec2.DescribeLaunchTemplatesInput, _ ...func(*ec2.Options)) (*ec2.DescribeLaunchTemplatesOutput, error) {
	time.Sleep(10 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.describes++
	out := &ec2.DescribeLaunchTemplatesOutput{}
	for _, name := range in.LaunchTemplateNames {
		if !c.templates[name] {
			return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.NotFoundException", Message: "not found"}
		}
		out.LaunchTemplates = append(out.LaunchTemplates, ec2types.LaunchTemplate{LaunchTemplateName: aws.String(name)})
	}
	return out, nil
}

func (c *templateCounter) CreateLaunchTemplate(_ context.Context, in *ec2.CreateLaunchTemplateInput, _ ...func(*ec2.Options)) (*ec2.CreateLaunchTemplateOutput, error) {
	time.Sleep(10 * time.Millisecond)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.creates++
	name := aws.ToString(in.LaunchTemplateName)
	if c.templates[name] {
		return nil, &smithy.GenericAPIError{Code: "InvalidLaunchTemplateName.AlreadyExistsException", Message: "exists"}
	}
	c.templates[name] = true
	return &ec2.CreateLaunchTemplateOutput{}, nil
}

func (c *templateCounter) DeleteLaunchTemplate(context.Context, *ec2.DeleteLaunchTemplateInput, ...func(*ec2.Options)) (*ec2.DeleteLaunchTemplateOutput, error) {
	return &ec2.DeleteLaunchTemplateOutput{}, nil
}

// The launches of a burst that need the same new template share one describe
// and one create; a later launch asks EC2 nothing.
func TestConcurrentLaunchesEnsureATemplateOnce(t *testing.T) {
	api := &templateCounter{templates: map[string]bool{}}
	templates := NewLaunchTemplates(api, "c", clocktesting.NewFakeClock(time.Now()))
	tmpl := &LaunchTemplate{ClassName: "default", ImageID: "ami-1", UserData: "x"}
	var wg sync.WaitGroup
	for i := 0; i < 30; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if name, err := templates.Ensure(context.Background(), tmpl); err != nil || name != tmpl.Name("c") {
				t.Errorf("Ensure: %q, %v", name, err)
			}
		}()
	}
	wg.Wait()
	if api.describes != 1 || api.creates != 1 {
		t.Errorf("30 concurrent launches made %d describes and %d creates; want 1 and 1", api.describes, api.creates)
	}
	if _, err := templates.Ensure(context.Background(), tmpl); err != nil {
		t.Fatal(err)
	}
	if api.describes != 1 || api.creates != 1 {
		t.Errorf("a launch after the template is known asked EC2 again: %d describes, %d creates", api.describes, api.creates)
	}
}
