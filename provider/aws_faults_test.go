package provider_test

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	"github.com/hashicorp/terraform-plugin-framework/providerserver"
	"github.com/hashicorp/terraform-plugin-go/tfprotov6"

	"github.com/dovetail-sh/dovetail/provider"
)

// The emulator answers every call at once and never loses a response; real AWS
// throttles, drops connections and deletes asynchronously. These middlewares, added
// to the provider's AWS clients, play those parts.

// factoriesWith serve a provider whose AWS clients carry apiOptions.
func factoriesWith(apiOptions ...func(*middleware.Stack) error) map[string]func() (tfprotov6.ProviderServer, error) {
	return map[string]func() (tfprotov6.ProviderServer, error){
		"dovetail": providerserver.NewProtocol6WithError(provider.New("test", apiOptions...)()),
	}
}

// failCall answers a call with err, without sending it, while on is set and the call's
// input satisfies match. It runs before the SDK's retries, as a final answer does.
func failCall(on *atomic.Bool, match func(input any) bool, err error) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("FailCall", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
			if on.Load() && match(in.Parameters) {
				return middleware.InitializeOutput{}, middleware.Metadata{}, err
			}
			return next.HandleInitialize(ctx, in)
		}), middleware.After)
	}
}

// apiError is an error as AWS answers it.
func apiError(code, message string) error {
	return &smithy.GenericAPIError{Code: code, Message: message, Fault: smithy.FaultClient}
}

// lostResponse lets the next call of the operation reach the server while armed is
// set, then drops its response as a reset connection would, once: the SDK retries a
// request that already took effect.
func lostResponse(operation string, armed *atomic.Bool) func(*middleware.Stack) error {
	return func(stack *middleware.Stack) error {
		return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("LoseResponse", func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (middleware.FinalizeOutput, middleware.Metadata, error) {
			out, md, err := next.HandleFinalize(ctx, in)
			if err == nil && awsmiddleware.GetOperationName(ctx) == operation && armed.CompareAndSwap(true, false) {
				return middleware.FinalizeOutput{}, md, connectionReset{}
			}
			return out, md, err
		}), "Retry", middleware.After)
	}
}

// connectionReset is what the SDK sees when a connection drops after the request was
// sent; it retries it.
type connectionReset struct{}

func (connectionReset) Error() string {
	return "read tcp: connection reset by peer (injected after the request reached the server)"
}
func (connectionReset) RetryableError() bool { return true }

// slowEndpointDeletion plays EC2's asynchronous deletion of VPC endpoints, which the
// emulator does at once: a deleted endpoint is listed as deleting for the next two
// DescribeVpcEndpoints calls (for as long as stuck is set), and DeleteSecurityGroup
// answers DependencyViolation while any is, and once more after, as the endpoints'
// network interfaces are released last.
type slowEndpointDeletion struct {
	stuck atomic.Bool

	mu         sync.Mutex
	deleting   map[string]int // endpoint → listings left that show it deleting
	eniLag     int
	violations int
}

func (s *slowEndpointDeletion) option(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("SlowEndpointDeletion", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		switch params := in.Parameters.(type) {
		case *ec2.DeleteVpcEndpointsInput:
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				if s.deleting == nil {
					s.deleting = map[string]int{}
				}
				for _, id := range params.VpcEndpointIds {
					s.deleting[id] = 2
				}
				s.eniLag = 1
			}
			return out, md, err
		case *ec2.DescribeVpcEndpointsInput:
			out, md, err := next.HandleInitialize(ctx, in)
			res, ok := out.Result.(*ec2.DescribeVpcEndpointsOutput)
			if err != nil || !ok {
				return out, md, err
			}
			listed := map[string]bool{}
			for i, ep := range res.VpcEndpoints {
				id := aws.ToString(ep.VpcEndpointId)
				if _, ok := s.deleting[id]; ok {
					res.VpcEndpoints[i].State = "deleting"
					listed[id] = true
				}
			}
			for id := range s.deleting {
				if !listed[id] {
					res.VpcEndpoints = append(res.VpcEndpoints, ec2types.VpcEndpoint{VpcEndpointId: aws.String(id), State: "deleting"})
				}
			}
			if !s.stuck.Load() {
				for id, left := range s.deleting {
					if left <= 1 {
						delete(s.deleting, id)
					} else {
						s.deleting[id] = left - 1
					}
				}
			}
			return out, md, err
		case *ec2.DeleteSecurityGroupInput:
			if len(s.deleting) > 0 || s.eniLag > 0 {
				if len(s.deleting) == 0 {
					s.eniLag--
				}
				s.violations++
				return middleware.InitializeOutput{}, middleware.Metadata{}, apiError("DependencyViolation",
					"resource "+aws.ToString(params.GroupId)+" has a dependent object")
			}
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.After)
}
