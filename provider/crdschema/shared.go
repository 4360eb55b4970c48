// Package crdschema turns a CustomResourceDefinition into typed Terraform attributes
// and checks values against it offline, with the kube-apiserver's own defaulting,
// OpenAPI and CEL validation. The provider's NodePool and EC2NodeClass resources are
// built from the CRDs Dovetail installs, so their schema, defaults and validation
// rules are the cluster's by construction and known before the CRD is installed.
package crdschema

import "github.com/dovetail-sh/dovetail/controller/crdschema"

// The schema reading and HCL writing are controller/crdschema's, which the CLI
// uses without the Terraform framework; these names keep the provider's.
type (
	Kind      = crdschema.Kind
	Reference = crdschema.Reference
)

var (
	Load  = crdschema.Load
	HCL   = crdschema.HCL
	Quote = crdschema.Quote
	Snake = crdschema.Snake
)
