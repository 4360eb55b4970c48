// Package templates renders what Dovetail installs into a cluster from the Helm chart
// (charts/dovetail): the CRDs, generated into the chart by `make generate` from
// controller/apis, and the controller's RBAC, Deployment, Service and PDB. The
// Terraform provider, `dovetail render` and Helm read the same files, so the ways of
// installing cannot drift apart.
package templates
