package iampolicy

import (
	"context"
	"fmt"
	"sync"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/smithy-go/middleware"
)

// Call is one AWS API call the controller made, with the authorization requests AWS
// makes for it.
type Call struct {
	Service   string // the SDK's service id: "EC2", "IAM", ...
	Operation string
	Region    string
	Requests  []Request
	// Err says why the call could not be turned into authorization requests (an
	// operation without a mapping, a resource the lookup could not find): such a call
	// is unchecked, and Check fails on it.
	Err error
}

func (c Call) String() string { return c.Service + " " + c.Operation }

// Options tell the recorder what AWS would know about the caller and its resources.
type Options struct {
	// Partition defaults to "aws".
	Partition string
	// AccountID is the caller's account, which owns what it creates.
	AccountID string
	// Lookup reads the state of existing resources whose tags or contents AWS
	// authorizes on: instances and launch templates being deleted or launched from,
	// instance profiles and their roles. It must not go through the recorder.
	Lookup Lookup
	// SSMParameterAliases maps a parameter path prefix a test publishes under to the
	// one AWS publishes the same parameters under (the emulator refuses names under
	// /aws), so the policy is checked against the path the controller reads on AWS.
	SSMParameterAliases map[string]string
}

// Recorder records the AWS calls made through clients it instruments (see
// APIOption) as authorization requests.
type Recorder struct {
	opts Options

	mu        sync.Mutex
	calls     []Call
	templates map[string]*LaunchTemplate // by name and by id, as seen at creation
}

// NewRecorder returns an empty recorder.
func NewRecorder(opts Options) *Recorder {
	if opts.Partition == "" {
		opts.Partition = "aws"
	}
	return &Recorder{opts: opts, templates: map[string]*LaunchTemplate{}}
}

// APIOption instruments an SDK client: use it as an entry of the client's
// APIOptions. It runs last in the Initialize step, so it sees the input as sent.
func (r *Recorder) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("iampolicy.Recorder",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			service, op, region := awsmiddleware.GetServiceID(ctx), awsmiddleware.GetOperationName(ctx), awsmiddleware.GetRegion(ctx)
			// Resource state is read before the call: a delete removes what it is
			// authorized on.
			reqs, err := r.Requests(ctx, service, op, region, in.Parameters)
			out, md, callErr := next.HandleInitialize(ctx, in)
			if callErr == nil {
				r.remember(in.Parameters, out.Result)
			}
			r.mu.Lock()
			r.calls = append(r.calls, Call{Service: service, Operation: op, Region: region, Requests: reqs, Err: err})
			r.mu.Unlock()
			return out, md, callErr
		}), middleware.After)
}

// Calls returns what was recorded so far.
func (r *Recorder) Calls() []Call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call(nil), r.calls...)
}

// Requests turns a call's typed input into the authorization requests AWS makes for
// it. An operation without a mapping is an error, so a new call cannot go unchecked.
func (r *Recorder) Requests(ctx context.Context, service, operation, region string, input any) ([]Request, error) {
	ops, ok := mappings[service]
	if !ok {
		return nil, fmt.Errorf("no IAM mapping for service %s (operation %s): map it in tests/iampolicy", service, operation)
	}
	build, ok := ops[operation]
	if !ok {
		return nil, fmt.Errorf("no IAM mapping for %s %s: map it in tests/iampolicy", service, operation)
	}
	c := &call{r: r, ctx: ctx, region: region}
	reqs, err := build(c, input)
	if err != nil {
		return nil, fmt.Errorf("authorizing %s %s, %w", service, operation, err)
	}
	return reqs, nil
}

// remember keeps what a launch template was created with, which later launches
// from it are authorized on.
func (r *Recorder) remember(input, output any) {
	in, ok := input.(*ec2.CreateLaunchTemplateInput)
	if !ok {
		return
	}
	out, ok := output.(*ec2.CreateLaunchTemplateOutput)
	if !ok || out.LaunchTemplate == nil {
		return
	}
	lt := launchTemplateFromCreate(in)
	lt.ID = deref(out.LaunchTemplate.LaunchTemplateId)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.templates[lt.Name] = lt
	r.templates[lt.ID] = lt
}

func (r *Recorder) seenTemplate(key string) *LaunchTemplate {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.templates[key]
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
