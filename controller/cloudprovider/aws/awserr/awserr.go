// Package awserr classifies AWS API errors by code, for the controller and the
// Terraform provider alike.
package awserr

import (
	"errors"
	"strings"

	"github.com/aws/smithy-go"
)

// IsCode reports whether err is an AWS API error with one of the codes.
func IsCode(err error, codes ...string) bool {
	var apiErr smithy.APIError
	if !errors.As(err, &apiErr) {
		return false
	}
	for _, c := range codes {
		if apiErr.ErrorCode() == c {
			return true
		}
	}
	return false
}

// IsNotFound reports an AWS error whose code says the resource does not exist.
func IsNotFound(err error) bool {
	var apiErr smithy.APIError
	return errors.As(err, &apiErr) && strings.Contains(apiErr.ErrorCode(), "NotFound")
}
