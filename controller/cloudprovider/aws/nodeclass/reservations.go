package nodeclass

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
)

// CapacityReservationAPI is the part of EC2 reservation resolution uses.
type CapacityReservationAPI interface {
	DescribeCapacityReservations(context.Context, *ec2.DescribeCapacityReservationsInput, ...func(*ec2.Options)) (*ec2.DescribeCapacityReservationsOutput, error)
}

// Reservation is a resolved capacity reservation with how many instances it can
// still take.
type Reservation struct {
	awsv1.CapacityReservation
	Available int32
}

// CapacityBlockExpiration is how long before a capacity block ends that it stops
// taking nodes and its nodes are replaced: 10 minutes before EC2 starts reclaiming
// them, 30 minutes before the end.
const CapacityBlockExpiration = 40 * time.Minute

// States of a capacity reservation in the class's status.
const (
	ReservationStateActive   = "active"
	ReservationStateExpiring = "expiring"
)

// Expiring reports whether a reservation is a capacity block within
// CapacityBlockExpiration of its end.
func Expiring(r awsv1.CapacityReservation, now time.Time) bool {
	return r.ReservationType == ReservationTypeCapacityBlock && r.EndTime != nil && !now.Before(r.EndTime.Add(-CapacityBlockExpiration))
}

// Reservation types, as the capacity-reservation-type label names them.
const (
	ReservationTypeDefault       = "default"
	ReservationTypeCapacityBlock = "capacity-block"
)

// CapacityReservations resolves capacity reservation selector terms to the active
// reservations they match. Unlike subnets, matching none is not an error: a
// reservation that ended leaves the class launching on-demand and spot.
func CapacityReservations(ctx context.Context, api CapacityReservationAPI, terms []awsv1.CapacityReservationSelectorTerm, now time.Time) ([]Reservation, error) {
	seen := map[string]Reservation{}
	for _, term := range terms {
		in := &ec2.DescribeCapacityReservationsInput{Filters: []ec2types.Filter{{Name: aws.String("state"), Values: []string{string(ec2types.CapacityReservationStateActive)}}}}
		if term.ID != "" {
			in.CapacityReservationIds = []string{term.ID}
		} else {
			in.Filters = append(in.Filters, tagFilters(term.Tags)...)
			if term.OwnerID != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("owner-id"), Values: []string{term.OwnerID}})
			}
			if term.InstanceMatchCriteria != "" {
				in.Filters = append(in.Filters, ec2types.Filter{Name: aws.String("instance-match-criteria"), Values: []string{term.InstanceMatchCriteria}})
			}
		}
		err := eachPage(ctx, ec2.NewDescribeCapacityReservationsPaginator(api, in), term.ID != "", "capacity reservations for "+describeReservationTerm(term), func(page *ec2.DescribeCapacityReservationsOutput) {
			for _, r := range page.CapacityReservations {
				if r.State != ec2types.CapacityReservationStateActive {
					continue
				}
				out := Reservation{CapacityReservation: awsv1.CapacityReservation{
					ID: aws.ToString(r.CapacityReservationId), AvailabilityZone: aws.ToString(r.AvailabilityZone),
					InstanceType: aws.ToString(r.InstanceType), InstanceMatchCriteria: string(r.InstanceMatchCriteria),
					OwnerID: aws.ToString(r.OwnerId), ReservationType: ReservationTypeDefault, State: ReservationStateActive,
					Interruptible: aws.ToBool(r.Interruptible),
				}, Available: aws.ToInt32(r.AvailableInstanceCount)}
				if r.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
					out.ReservationType = ReservationTypeCapacityBlock
				}
				if r.EndDate != nil {
					end := metav1.NewTime(*r.EndDate)
					out.EndTime = &end
				}
				if Expiring(out.CapacityReservation, now) {
					out.State = ReservationStateExpiring
				}
				seen[out.ID] = out
			}
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]Reservation, 0, len(seen))
	for _, r := range seen {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

func describeReservationTerm(term awsv1.CapacityReservationSelectorTerm) string {
	if term.ID != "" {
		return "id " + term.ID
	}
	parts := []string{"tags " + formatTags(term.Tags)}
	if term.OwnerID != "" {
		parts = append(parts, "ownerID "+term.OwnerID)
	}
	if term.InstanceMatchCriteria != "" {
		parts = append(parts, "instanceMatchCriteria "+term.InstanceMatchCriteria)
	}
	return strings.Join(parts, ", ")
}
