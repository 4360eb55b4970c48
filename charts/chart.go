// Package charts embeds the Helm chart, the one source of what Dovetail installs: Helm
// users install charts/dovetail, while `dovetail render` and the Terraform provider
// render the same files with Helm's engine (package templates), so the install paths
// cannot drift apart. The CRDs live in the chart's crds/ directory for the same reason.
package charts

import "embed"

// Dovetail is charts/dovetail; paths inside it start with "dovetail/".
//
//go:embed all:dovetail
var Dovetail embed.FS

// DovetailRoot is the chart's directory inside Dovetail.
const DovetailRoot = "dovetail"
