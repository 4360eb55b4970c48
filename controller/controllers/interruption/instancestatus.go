package interruption

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/smithy-go"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/dovetail-sh/dovetail/controller/metrics"
)

// EC2StatusAPI is the part of EC2 instance health is read from.
type EC2StatusAPI interface {
	DescribeInstanceStatus(context.Context, *ec2.DescribeInstanceStatusInput, ...func(*ec2.Options)) (*ec2.DescribeInstanceStatusOutput, error)
}

// InstanceStatusInterval is how often EC2's instance status is read, as Karpenter
// reads it.
const InstanceStatusInterval = time.Minute

// UnhealthyThreshold is how long a status check must have failed before the
// instance is replaced: a check that fails briefly (a reboot) recovers on its own.
const UnhealthyThreshold = 120 * time.Second

// statusCategory is where EC2 reports a failure, as Karpenter's metric labels it.
type statusCategory string

const (
	categoryInstanceStatus statusCategory = "InstanceStatus"
	categorySystemStatus   statusCategory = "SystemStatus"
	categoryEventStatus    statusCategory = "EventStatus"
)

// kindOf is the message kind each category acts as.
var kindOf = map[statusCategory]Kind{
	categoryInstanceStatus: InstanceStatusFailed,
	categorySystemStatus:   SystemStatusFailed,
	categoryEventStatus:    ScheduledEvent,
}

// statusFilters are the three questions asked each interval, as Karpenter asks
// them: impaired instance checks, impaired system checks, and scheduled events
// that stop or restart the instance. EBS status is not acted on.
var statusFilters = [][]ec2types.Filter{
	{{Name: aws.String("instance-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("system-status.status"), Values: []string{string(ec2types.SummaryStatusImpaired)}}},
	{{Name: aws.String("event.code"), Values: []string{string(ec2types.EventCodeInstanceReboot), string(ec2types.EventCodeSystemReboot),
		string(ec2types.EventCodeSystemMaintenance), string(ec2types.EventCodeInstanceRetirement), string(ec2types.EventCodeInstanceStop)}}},
}

// unhealthyInstance is an instance EC2 reports failing, by category.
type unhealthyInstance struct {
	id         string
	categories []statusCategory
}

// unhealthyInstances asks EC2 which instances fail a status check (for at least
// UnhealthyThreshold) or have a scheduled event, in the order EC2 lists them.
func unhealthyInstances(ctx context.Context, api EC2StatusAPI, now time.Time) ([]unhealthyInstance, error) {
	seen := map[string]bool{}
	var out []unhealthyInstance
	for _, filters := range statusFilters {
		pages := ec2.NewDescribeInstanceStatusPaginator(api, &ec2.DescribeInstanceStatusInput{Filters: filters})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("describing EC2 instance status, %w", err)
			}
			for _, s := range page.InstanceStatuses {
				id := aws.ToString(s.InstanceId)
				if seen[id] {
					continue
				}
				seen[id] = true
				if categories := failing(s, now); len(categories) > 0 {
					out = append(out, unhealthyInstance{id: id, categories: categories})
				}
			}
		}
	}
	return out, nil
}

// failing are the categories in which the status reports a failure that counts.
func failing(s ec2types.InstanceStatus, now time.Time) []statusCategory {
	var out []statusCategory
	check := func(summary *ec2types.InstanceStatusSummary, category statusCategory) {
		if summary == nil {
			return
		}
		for _, d := range summary.Details {
			// A failure without a start time has lasted as long as can be known.
			if d.Status == ec2types.StatusTypeFailed && (d.ImpairedSince == nil || now.Sub(*d.ImpairedSince) >= UnhealthyThreshold) {
				out = append(out, category)
				return
			}
		}
	}
	check(s.InstanceStatus, categoryInstanceStatus)
	check(s.SystemStatus, categorySystemStatus)
	if len(s.Events) > 0 {
		out = append(out, categoryEventStatus)
	}
	return out
}

// InstanceStatus acts on EC2's instance status, with or without an interruption
// queue: an instance failing its status checks has its claim deleted at once (its
// pods get no drain time, as it cannot drain), and one with a scheduled reboot,
// maintenance, retirement or stop is drained ahead of it; replacements are launched
// first, as for the queue's messages.
type InstanceStatus struct {
	*Controller
	ec2 EC2StatusAPI

	mu sync.Mutex
	// reported are the instance/category pairs counted in the metric, kept while
	// EC2 keeps reporting them, so each is counted once.
	reported map[reportedKey]bool
}

type reportedKey struct {
	instance string
	category statusCategory
}

// NewInstanceStatus acts through c on what api reports.
func NewInstanceStatus(c *Controller, api EC2StatusAPI) *InstanceStatus {
	return &InstanceStatus{Controller: c, ec2: api, reported: map[reportedKey]bool{}}
}

func (s *InstanceStatus) Name() string { return "interruption.instancestatus" }

// Register polls on the elected leader every InstanceStatusInterval.
func (s *InstanceStatus) Register(_ context.Context, mgr manager.Manager) error {
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		ctx = log.IntoContext(ctx, log.FromContext(ctx).WithName(s.Name()))
		for ctx.Err() == nil {
			if err := s.Poll(ctx); err != nil && ctx.Err() == nil {
				var denied smithy.APIError
				if errors.As(err, &denied) && denied.ErrorCode() == "UnauthorizedOperation" {
					log.FromContext(ctx).Error(err, "ec2:DescribeInstanceStatus is denied: unhealthy instances are not replaced; add it to the controller's IAM policy and restart")
					return nil
				}
				log.FromContext(ctx).Error(err, "reading EC2 instance status")
			}
			if !s.sleep(ctx, InstanceStatusInterval) {
				return nil
			}
		}
		return nil
	}))
}

// Poll reads EC2's instance status once and acts on every claim of an unhealthy
// instance.
func (s *InstanceStatus) Poll(ctx context.Context) error {
	unhealthy, err := unhealthyInstances(ctx, s.ec2, s.clock.Now())
	if err != nil {
		return err
	}
	current := map[reportedKey]bool{}
	var errs []error
	for _, u := range unhealthy {
		for _, category := range u.categories {
			found, err := s.actOnClaims(ctx, Message{Kind: kindOf[category], ID: "instance-status/" + u.id, InstanceIDs: []string{u.id}})
			if err != nil {
				errs = append(errs, err)
			}
			if found {
				current[reportedKey{u.id, category}] = true
			}
		}
	}
	s.count(current)
	return errors.Join(errs...)
}

// count adds each newly reported instance/category to the metric and forgets the
// ones EC2 no longer reports.
func (s *InstanceStatus) count(current map[reportedKey]bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k := range current {
		if !s.reported[k] {
			s.reported[k] = true
			metrics.InterruptionInstanceStatusUnhealthy.WithLabelValues(string(k.category)).Inc()
		}
	}
	for k := range s.reported {
		if !current[k] {
			delete(s.reported, k)
		}
	}
}
