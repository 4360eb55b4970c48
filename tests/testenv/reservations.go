package testenv

import (
	"context"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go/middleware"
)

// CapacityReservations emulates EC2 capacity reservations, which moto_server does
// not implement, on top of it: DescribeCapacityReservations answers from the
// reservations given (with EC2's filters), and a CreateFleet whose launch template
// targets a reservation launches on moto while the reservation has room, takes one
// place of it, and is refused with ReservationCapacityExceeded, as EC2 refuses it,
// once it is full; TerminateInstances gives an instance's place back.
type CapacityReservations struct {
	// Templates reads launch templates (a client without this emulator's option).
	Templates *ec2.Client

	mu           sync.Mutex
	reservations []ec2types.CapacityReservation
	// Launched counts the instances launched into each reservation.
	launched map[string]int
	// holding names the reservation each instance launched into holds a place in.
	holding map[string]string
}

// NewCapacityReservations emulates the given reservations.
func NewCapacityReservations(templates *ec2.Client, reservations ...ec2types.CapacityReservation) *CapacityReservations {
	return &CapacityReservations{Templates: templates, reservations: reservations, launched: map[string]int{}, holding: map[string]string{}}
}

// Launched is how many instances went into the reservation.
func (r *CapacityReservations) Launched(id string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.launched[id]
}

// Option installs the emulator on an EC2 client, after the middleware already there
// (an IAM recorder sees the calls it answers).
func (r *CapacityReservations) Option(o *ec2.Options) {
	o.APIOptions = append(o.APIOptions, r.APIOption)
}

// APIOption installs the emulator on any AWS client's stack (it acts on EC2 calls
// only), for operator.Options.AWSAPIOptions.
func (r *CapacityReservations) APIOption(stack *middleware.Stack) error {
	return stack.Initialize.Add(middleware.InitializeMiddlewareFunc("CapacityReservations", func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
		switch input := in.Parameters.(type) {
		case *ec2.DescribeCapacityReservationsInput:
			return middleware.InitializeOutput{Result: &ec2.DescribeCapacityReservationsOutput{CapacityReservations: r.describe(input)}}, middleware.Metadata{}, nil
		case *ec2.CreateFleetInput:
			return r.createFleet(ctx, input, in, next)
		case *ec2.TerminateInstancesInput:
			out, md, err := next.HandleInitialize(ctx, in)
			if err == nil {
				r.release(input.InstanceIds)
			}
			return out, md, err
		}
		return next.HandleInitialize(ctx, in)
	}), middleware.After)
}

func (r *CapacityReservations) describe(in *ec2.DescribeCapacityReservationsInput) []ec2types.CapacityReservation {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []ec2types.CapacityReservation
	for _, res := range r.reservations {
		if len(in.CapacityReservationIds) > 0 && !contains(in.CapacityReservationIds, aws.ToString(res.CapacityReservationId)) {
			continue
		}
		if matchesFilters(res, in.Filters) {
			out = append(out, res)
		}
	}
	return out
}

func matchesFilters(res ec2types.CapacityReservation, filters []ec2types.Filter) bool {
	tags := map[string]string{}
	for _, t := range res.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	for _, f := range filters {
		name := aws.ToString(f.Name)
		var value string
		switch {
		case name == "state":
			value = string(res.State)
		case name == "instance-type":
			value = aws.ToString(res.InstanceType)
		case name == "owner-id":
			value = aws.ToString(res.OwnerId)
		case name == "instance-match-criteria":
			value = string(res.InstanceMatchCriteria)
		case name == "tag-key":
			ok := false
			for _, k := range f.Values {
				_, has := tags[k]
				ok = ok || has
			}
			if !ok {
				return false
			}
			continue
		case strings.HasPrefix(name, "tag:"):
			v, has := tags[strings.TrimPrefix(name, "tag:")]
			if !has {
				return false
			}
			value = v
		default:
			continue
		}
		if !contains(f.Values, value) {
			return false
		}
	}
	return true
}

func contains(values []string, v string) bool {
	for _, x := range values {
		if x == v {
			return true
		}
	}
	return false
}

// target is the reservation a launch template targets, if any.
func (r *CapacityReservations) target(ctx context.Context, cfg ec2types.FleetLaunchTemplateConfigRequest) string {
	spec := cfg.LaunchTemplateSpecification
	if spec == nil || r.Templates == nil {
		return ""
	}
	out, err := r.Templates.DescribeLaunchTemplateVersions(ctx, &ec2.DescribeLaunchTemplateVersionsInput{
		LaunchTemplateName: spec.LaunchTemplateName, LaunchTemplateId: spec.LaunchTemplateId, Versions: []string{"$Latest"}})
	if err != nil || len(out.LaunchTemplateVersions) == 0 {
		return ""
	}
	data := out.LaunchTemplateVersions[0].LaunchTemplateData
	if data == nil || data.CapacityReservationSpecification == nil || data.CapacityReservationSpecification.CapacityReservationTarget == nil {
		return ""
	}
	return aws.ToString(data.CapacityReservationSpecification.CapacityReservationTarget.CapacityReservationId)
}

func (r *CapacityReservations) createFleet(ctx context.Context, fleet *ec2.CreateFleetInput, in middleware.InitializeInput, next middleware.InitializeHandler) (middleware.InitializeOutput, middleware.Metadata, error) {
	kept := *fleet
	kept.LaunchTemplateConfigs = nil
	var refused []ec2types.CreateFleetError
	targets := map[string]string{}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, cfg := range fleet.LaunchTemplateConfigs {
		id := r.target(ctx, cfg)
		if id == "" {
			kept.LaunchTemplateConfigs = append(kept.LaunchTemplateConfigs, cfg)
			continue
		}
		res := r.find(id)
		if res == nil || aws.ToInt32(res.AvailableInstanceCount) == 0 {
			for _, o := range cfg.Overrides {
				refused = append(refused, ec2types.CreateFleetError{
					ErrorCode:    aws.String("ReservationCapacityExceeded"),
					ErrorMessage: aws.String("The requested capacity reservation has no available capacity."),
					LaunchTemplateAndOverrides: &ec2types.LaunchTemplateAndOverridesResponse{Overrides: &ec2types.FleetLaunchTemplateOverrides{
						InstanceType: o.InstanceType, AvailabilityZone: o.AvailabilityZone, SubnetId: o.SubnetId}},
				})
			}
			continue
		}
		targets[aws.ToString(cfg.LaunchTemplateSpecification.LaunchTemplateName)] = id
		kept.LaunchTemplateConfigs = append(kept.LaunchTemplateConfigs, cfg)
	}
	if len(kept.LaunchTemplateConfigs) == 0 {
		return middleware.InitializeOutput{Result: &ec2.CreateFleetOutput{Errors: refused}}, middleware.Metadata{}, nil
	}
	in.Parameters = &kept
	out, md, err := next.HandleInitialize(ctx, in)
	if err != nil {
		return out, md, err
	}
	res, ok := out.Result.(*ec2.CreateFleetOutput)
	if !ok {
		return out, md, err
	}
	res.Errors = append(res.Errors, refused...)
	for _, inst := range res.Instances {
		name := ""
		if lt := inst.LaunchTemplateAndOverrides; lt != nil && lt.LaunchTemplateSpecification != nil {
			name = aws.ToString(lt.LaunchTemplateSpecification.LaunchTemplateName)
		}
		if id, ok := targets[name]; ok && len(inst.InstanceIds) > 0 {
			found := r.find(id)
			found.AvailableInstanceCount = aws.Int32(aws.ToInt32(found.AvailableInstanceCount) - int32(len(inst.InstanceIds)))
			r.launched[id] += len(inst.InstanceIds)
			for _, instance := range inst.InstanceIds {
				r.holding[instance] = id
			}
		}
	}
	return out, md, err
}

func (r *CapacityReservations) find(id string) *ec2types.CapacityReservation {
	for i := range r.reservations {
		if aws.ToString(r.reservations[i].CapacityReservationId) == id {
			return &r.reservations[i]
		}
	}
	return nil
}

// release gives the places terminated instances held back to their reservations,
// as EC2 does once they terminate.
func (r *CapacityReservations) release(instances []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, instance := range instances {
		id, ok := r.holding[instance]
		if !ok {
			continue
		}
		delete(r.holding, instance)
		if found := r.find(id); found != nil {
			found.AvailableInstanceCount = aws.Int32(aws.ToInt32(found.AvailableInstanceCount) + 1)
		}
	}
}
