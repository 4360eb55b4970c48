// Package cloudprovider is the boundary between Dovetail's controllers and a cloud:
// launching, finding and terminating the instance behind a NodeClaim, and describing
// the instance types a NodePool may launch.
package cloudprovider

import (
	"context"
	"errors"
	"fmt"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/scheduling"
)

// CloudProvider launches and terminates instances for NodeClaims.
type CloudProvider interface {
	// Name identifies the provider in logs and metrics.
	Name() string
	// Create launches an instance for the claim and returns the claim as launched:
	// status.providerID, capacity, allocatable, and labels naming the instance type,
	// zone and capacity type it got.
	Create(ctx context.Context, nc *v1.NodeClaim) (*v1.NodeClaim, error)
	// Delete terminates the claim's instance; a NodeClaimNotFoundError means it is gone.
	Delete(ctx context.Context, nc *v1.NodeClaim) error
	// Get returns the claim for a providerID, or a NodeClaimNotFoundError.
	Get(ctx context.Context, providerID string) (*v1.NodeClaim, error)
	// List returns every instance this provider launched for the cluster.
	List(ctx context.Context) ([]*v1.NodeClaim, error)
	// GetInstanceTypes returns what the NodePool may launch, with offerings and prices.
	GetInstanceTypes(ctx context.Context, np *v1.NodePool) ([]*scheduling.InstanceType, error)
	// IsDrifted says why the claim's instance no longer matches its node class, or "".
	IsDrifted(ctx context.Context, nc *v1.NodeClaim) (DriftReason, error)
	// Reboot asks for the claim's instance to be rebooted in place and returns once
	// the cloud accepted it. operationID names the one reboot, for the logs. A
	// provider that cannot returns a NodeRebootNotImplementedError; a refusal
	// retrying will not change, a NodeRebootFailedError; a gone instance, a
	// NodeClaimNotFoundError.
	Reboot(ctx context.Context, nc *v1.NodeClaim, operationID string) error
}

// NodeRebootNotImplementedError: the provider cannot reboot instances.
type NodeRebootNotImplementedError struct{ Provider string }

func (e *NodeRebootNotImplementedError) Error() string {
	return fmt.Sprintf("cloud provider %s cannot reboot instances", e.Provider)
}

// NodeRebootFailedError: the cloud refused the reboot for good (not permitted).
type NodeRebootFailedError struct{ Err error }

func (e *NodeRebootFailedError) Error() string { return fmt.Sprintf("reboot refused, %v", e.Err) }
func (e *NodeRebootFailedError) Unwrap() error { return e.Err }

// IsNodeRebootRefused reports whether err says retrying the reboot cannot help:
// the provider cannot reboot, or the cloud refused it for good.
func IsNodeRebootRefused(err error) bool {
	var ni *NodeRebootNotImplementedError
	var nf *NodeRebootFailedError
	return errors.As(err, &ni) || errors.As(err, &nf)
}

// DriftReason names why a claim drifted; empty means it has not.
type DriftReason string

// NodeClaimNotFoundError reports that the instance behind a claim does not exist.
type NodeClaimNotFoundError struct{ Err error }

func (e *NodeClaimNotFoundError) Error() string { return fmt.Sprintf("nodeclaim not found, %v", e.Err) }
func (e *NodeClaimNotFoundError) Unwrap() error { return e.Err }

// NewNodeClaimNotFoundError wraps err.
func NewNodeClaimNotFoundError(err error) error { return &NodeClaimNotFoundError{Err: err} }

// IsNodeClaimNotFound reports whether err says the instance is gone.
func IsNodeClaimNotFound(err error) bool {
	var nf *NodeClaimNotFoundError
	return errors.As(err, &nf)
}

// InsufficientCapacityError reports that no offering of the claim could be launched.
type InsufficientCapacityError struct{ Err error }

func (e *InsufficientCapacityError) Error() string {
	return fmt.Sprintf("insufficient capacity, %v", e.Err)
}
func (e *InsufficientCapacityError) Unwrap() error { return e.Err }

// NewInsufficientCapacityError wraps err.
func NewInsufficientCapacityError(err error) error { return &InsufficientCapacityError{Err: err} }

// IsInsufficientCapacity reports whether err is an InsufficientCapacityError.
func IsInsufficientCapacity(err error) bool {
	var ic *InsufficientCapacityError
	return errors.As(err, &ic)
}

// NodeClassNotReadyError reports that the claim's node class is not Ready: a launch
// cannot succeed until it is, so the claim goes and its pods are planned again, as
// Karpenter does (reason nodeclass_not_ready).
type NodeClassNotReadyError struct{ Err error }

func (e *NodeClassNotReadyError) Error() string {
	return fmt.Sprintf("node class not ready, %v", e.Err)
}
func (e *NodeClassNotReadyError) Unwrap() error { return e.Err }

// NewNodeClassNotReadyError wraps err.
func NewNodeClassNotReadyError(err error) error { return &NodeClassNotReadyError{Err: err} }

// IsNodeClassNotReady reports whether err is a NodeClassNotReadyError.
func IsNodeClassNotReady(err error) bool {
	var nr *NodeClassNotReadyError
	return errors.As(err, &nr)
}

// Requirements returns a claim's requirements as the engine's algebra.
func Requirements(nc *v1.NodeClaim) (scheduling.Requirements, error) {
	reqs := scheduling.Requirements{}
	for _, r := range nc.Spec.Requirements {
		req, err := scheduling.NewRequirement(r.Key, r.Operator, r.Values...)
		if err != nil {
			return nil, fmt.Errorf("nodeclaim %s: %w", nc.Name, err)
		}
		reqs.Add(req)
	}
	return reqs, nil
}

// CheapestCompatible picks the cheapest instance type and offering a claim allows.
func CheapestCompatible(nc *v1.NodeClaim, types []*scheduling.InstanceType) (*scheduling.InstanceType, scheduling.Offering, error) {
	reqs, err := Requirements(nc)
	if err != nil {
		return nil, scheduling.Offering{}, err
	}
	var best *scheduling.InstanceType
	var bestOffering scheduling.Offering
	for _, it := range types {
		o, ok := scheduling.CheapestOffering(it, reqs)
		if !ok || !scheduling.Compatible(it, reqs) {
			continue
		}
		if best == nil || o.Price < bestOffering.Price || (o.Price == bestOffering.Price && it.Name < best.Name) {
			best, bestOffering = it, o
		}
	}
	if best == nil {
		return nil, scheduling.Offering{}, NewInsufficientCapacityError(fmt.Errorf("no available offering satisfies the requirements of nodeclaim %s", nc.Name))
	}
	return best, bestOffering, nil
}
