package provider_test

import (
	"context"
	"sync/atomic"

	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
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
