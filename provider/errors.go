package provider

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// isNotFound reports an AWS error saying the resource does not exist.
func isNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "NotFound")
}
