// Package status reconciles an EC2NodeClass: it resolves the subnets, security
// groups and images its selectors match, ensures the instance profile for its role,
// and reports each in status with a condition a person can act on. Its finalizer
// removes the instance profiles it created once no NodeClaim uses the class.
//
// A profile holds one role, and nodes keep the profile they were launched with. So a
// new role gets a new profile, published in status only once it holds the role; the
// old profile, untouched, is recorded as retiring and deleted when no instance uses
// it any more. A role that cannot be added leaves the old profile and status as they
// were, and says why in InstanceProfileReady.
package status

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
)

// Finalizer guards the resources the controller creates for a class.
const Finalizer = awsv1.Group + "/termination"

// AnnotationRetiringInstanceProfiles is the class's record of its retiring profiles.
const AnnotationRetiringInstanceProfiles = awsv1.AnnotationRetiringInstanceProfiles

// RetireAfter is the least time a retiring profile is kept: a launch that read the
// old status just before the switch has its instance visible to DescribeInstances by
// then, so the in-use check sees it.
const RetireAfter = 5 * time.Minute

// EC2API is the part of EC2 the controller uses: resolving the selectors, and
// finding the instances that still use a profile it retires.
type EC2API interface {
	nodeclass.EC2API
	nodeclass.CapacityReservationAPI
	nodeclass.PlacementGroupAPI
	DescribeInstances(context.Context, *ec2.DescribeInstancesInput, ...func(*ec2.Options)) (*ec2.DescribeInstancesOutput, error)
}

// Controller is the EC2NodeClass status controller.
type Controller struct {
	kube        client.Client
	ec2         EC2API
	amis        *nodeclass.AMIResolver
	iam         nodeclass.IAMAPI
	clusterName string
	region      string
	clock       clock.Clock
	// LaunchTemplates, when set, are deleted with the class.
	LaunchTemplates interface {
		DeleteForClass(ctx context.Context, class string) error
	}
	// Refresh is how often a Ready class's subnets, images, instance profile,
	// reservations and placement group are resolved again (Karpenter's
	// amiRefreshInterval and subnetRefreshInterval, the shorter of them); zero
	// means DefaultRefresh.
	Refresh time.Duration
	// SecurityGroupRefresh is how often a Ready class's security groups are
	// resolved again (Karpenter v1.15's securityGroupRefreshInterval); zero means
	// DefaultSecurityGroupRefresh.
	SecurityGroupRefresh time.Duration

	mu sync.Mutex
	// resolved is when each class's parts were last resolved, at which generation.
	// It is memory only: after a restart every class is resolved at once.
	resolved map[types.UID]resolution
}

// resolution is when a class's two refresh groups were last resolved.
type resolution struct {
	generation   int64
	rest, groups time.Time
}

// DefaultRefresh is how often a Ready class is resolved again unless told.
const DefaultRefresh = 5 * time.Minute

// DefaultSecurityGroupRefresh is Karpenter's securityGroupRefreshInterval default.
const DefaultSecurityGroupRefresh = time.Minute

func (c *Controller) intervals() (rest, groups time.Duration) {
	return cmp.Or(c.Refresh, DefaultRefresh), cmp.Or(c.SecurityGroupRefresh, DefaultSecurityGroupRefresh)
}

// due says which parts of a class to resolve now: all of them for a class not yet
// resolved by this process, changed since, or not Ready; otherwise each group once
// its interval has passed.
func (c *Controller) due(nc *awsv1.EC2NodeClass, now time.Time) (rest, groups bool) {
	c.mu.Lock()
	r, ok := c.resolved[nc.UID]
	c.mu.Unlock()
	if !ok || r.generation != nc.Generation || !meta.IsStatusConditionTrue(nc.Status.Conditions, awsv1.ConditionTypeReady) {
		return true, true
	}
	restEvery, groupsEvery := c.intervals()
	return !now.Before(r.rest.Add(restEvery)), !now.Before(r.groups.Add(groupsEvery))
}

// recordResolved notes what was resolved at now, and returns how long until the next part
// is due.
func (c *Controller) recordResolved(nc *awsv1.EC2NodeClass, now time.Time, rest, groups bool) time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.resolved == nil {
		c.resolved = map[types.UID]resolution{}
	}
	r := c.resolved[nc.UID]
	r.generation = nc.Generation
	if rest {
		r.rest = now
	}
	if groups {
		r.groups = now
	}
	c.resolved[nc.UID] = r
	return c.untilDue(r, now)
}

// untilDue is how long until the first of r's groups is due again.
func (c *Controller) untilDue(r resolution, now time.Time) time.Duration {
	restEvery, groupsEvery := c.intervals()
	return max(time.Second, min(r.rest.Add(restEvery).Sub(now), r.groups.Add(groupsEvery).Sub(now)))
}

func (c *Controller) forget(nc *awsv1.EC2NodeClass) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.resolved, nc.UID)
}

// NewController wires the controller.
func NewController(kube client.Client, ec2 EC2API, amis *nodeclass.AMIResolver, iam nodeclass.IAMAPI, clusterName, region string, clk clock.Clock) *Controller {
	return &Controller{kube: kube, ec2: ec2, amis: amis, iam: iam, clusterName: clusterName, region: region, clock: clk}
}

func (c *Controller) Name() string { return "ec2nodeclass.status" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&awsv1.EC2NodeClass{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *Controller) Reconcile(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	if nc.DeletionTimestamp != nil {
		return c.finalize(ctx, nc)
	}
	if !controllerutil.ContainsFinalizer(nc, Finalizer) {
		patch := client.MergeFrom(nc.DeepCopy())
		controllerutil.AddFinalizer(nc, Finalizer)
		if err := c.kube.Patch(ctx, nc, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	now := c.clock.Now()
	resolveRest, resolveGroups := c.due(nc, now)
	if !resolveRest && !resolveGroups {
		c.mu.Lock()
		r := c.resolved[nc.UID]
		c.mu.Unlock()
		return reconcile.Result{RequeueAfter: c.untilDue(r, now)}, nil
	}
	// The profile comes first: switching it records the old one (a metadata write)
	// before the status patch below names the new one.
	var profile string
	var profileErr error
	if resolveRest {
		profile, profileErr = c.instanceProfile(ctx, nc)
	}

	patch := client.MergeFrom(nc.DeepCopy())
	ready := true
	record := func(condition string, err error) {
		status, reason, message := metav1.ConditionTrue, condition, ""
		if err != nil {
			status, reason, message, ready = metav1.ConditionFalse, condition+"NotReady", err.Error(), false
			var r reasoned
			if errors.As(err, &r) {
				reason = r.reason
			}
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: condition, Status: status, Reason: reason,
			Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	}

	if resolveGroups {
		groups, err := nodeclass.SecurityGroups(ctx, c.ec2, nc.Spec.SecurityGroupSelectorTerms)
		nc.Status.SecurityGroups = groups
		record(awsv1.ConditionTypeSecurityGroupsReady, err)
	}
	if resolveRest {
		c.resolveRest(ctx, nc, profile, profileErr, record)
	}

	readyErr := error(nil)
	if !ready {
		readyErr = fmt.Errorf("one or more of SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady, CapacityReservationsReady, PlacementGroupReady, ValidationSucceeded is False; see their messages")
	}
	record(awsv1.ConditionTypeReady, readyErr)
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	next := c.recordResolved(nc, now, resolveRest, resolveGroups)
	// Selectors match cloud resources that change without telling us: look again.
	if ready {
		return reconcile.Result{RequeueAfter: next}, nil
	}
	return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
}

// resolveRest resolves everything of the class but its security groups: subnets,
// images, instance profile, reservations, placement group, kubelet validation.
func (c *Controller) resolveRest(ctx context.Context, nc *awsv1.EC2NodeClass, profile string, profileErr error, record func(string, error)) {
	subnets, err := nodeclass.Subnets(ctx, c.ec2, nc.Spec.SubnetSelectorTerms)
	nc.Status.Subnets = nil
	for _, s := range subnets {
		nc.Status.Subnets = append(nc.Status.Subnets, s.Subnet)
	}
	record(awsv1.ConditionTypeSubnetsReady, err)

	amis, err := c.amis.Resolve(ctx, nc.Spec.AMISelectorTerms)
	nc.Status.AMIs = amis
	record(awsv1.ConditionTypeAMIsReady, err)

	nc.Status.InstanceProfile = profile
	record(awsv1.ConditionTypeInstanceProfileReady, profileErr)

	if len(nc.Spec.CapacityReservationSelectorTerms) > 0 || len(nc.Status.CapacityReservations) > 0 {
		reservations, err := nodeclass.CapacityReservations(ctx, c.ec2, nc.Spec.CapacityReservationSelectorTerms, c.clock.Now())
		if err == nil {
			// On an error the reservations already in status stay: nodes are
			// launched into them until EC2 answers again.
			nc.Status.CapacityReservations = nil
			for _, r := range reservations {
				nc.Status.CapacityReservations = append(nc.Status.CapacityReservations, r.CapacityReservation)
			}
		}
		record(awsv1.ConditionTypeCapacityReservationsReady, err)
	}

	if sel := nc.Spec.PlacementGroupSelector; sel != nil || nc.Status.PlacementGroup != nil {
		pg, err := nodeclass.PlacementGroup(ctx, c.ec2, sel)
		switch {
		case err != nil:
			// The group in status stays: nodes keep launching into it until EC2
			// answers again.
			record(awsv1.ConditionTypePlacementGroupReady, reasoned{"PlacementGroupResolutionFailed", err})
		case pg == nil && sel != nil:
			nc.Status.PlacementGroup = nil
			name := aws.ToString(sel.Name)
			if sel.ID != nil {
				name = *sel.ID
			}
			record(awsv1.ConditionTypePlacementGroupReady, reasoned{"PlacementGroupNotFound", fmt.Errorf("placement group %q not found or not available; create it or fix placementGroupSelector", name)})
		default:
			nc.Status.PlacementGroup = pg
			record(awsv1.ConditionTypePlacementGroupReady, nil)
		}
	}

	record(awsv1.ConditionTypeValidationSucceeded, kubeletErrors(nc))
}

// reasoned is an error with Karpenter's condition reason for it.
type reasoned struct {
	reason string
	err    error
}

func (r reasoned) Error() string { return r.err.Error() }
func (r reasoned) Unwrap() error { return r.err }

// instanceProfile returns the profile the class's nodes launch with. On an error it
// returns the profile in status, which nodes already use, unchanged.
func (c *Controller) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	current := nc.Status.InstanceProfile
	desired := ""
	if nc.Spec.InstanceProfile != nil {
		desired = *nc.Spec.InstanceProfile
	} else {
		name, err := c.roleProfile(ctx, nc)
		if err != nil {
			return current, err
		}
		desired = name
	}
	if current != "" && current != desired {
		retiring := c.retiring(ctx, nc)
		if _, ok := retiring[current]; !ok {
			retiring[current] = c.clock.Now()
			if err := c.writeRetiring(ctx, nc, retiring); err != nil {
				return current, fmt.Errorf("recording instance profile %s as retiring, %w", current, err)
			}
		}
	}
	if err := c.retireUnused(ctx, nc, desired); err != nil {
		// The nodes have their profile; a profile left over for a while is no reason
		// to stop launching.
		log.FromContext(ctx).Error(err, "retiring instance profiles", "ec2nodeclass", nc.Name)
	}
	return desired, nil
}

// roleProfile ensures a profile holding the class's role and returns its name: the
// one in status while it holds the role (a profile from before names carried the
// role included), else the role's own.
func (c *Controller) roleProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if current := nc.Status.InstanceProfile; current != "" {
		p, err := nodeclass.GetInstanceProfile(ctx, c.iam, current)
		if err != nil {
			return "", err
		}
		if p != nil && p.HasRole(nc.Spec.Role) && p.OwnedBy(c.clusterName, c.region, nc.Name) {
			return current, nil
		}
	}
	name := nodeclass.InstanceProfileName(c.clusterName, c.region, nc.Name, nc.Spec.Role)
	if err := nodeclass.EnsureInstanceProfile(ctx, c.iam, name, nc.Spec.Role, nodeclass.InstanceProfileTags(c.clusterName, c.region, nc.Name)); err != nil {
		return "", err
	}
	return name, nil
}

// retireUnused deletes the retiring profiles no instance uses any more, and forgets
// those that are gone or not the controller's to delete.
func (c *Controller) retireUnused(ctx context.Context, nc *awsv1.EC2NodeClass, keep string) error {
	retiring := c.retiring(ctx, nc)
	if len(retiring) == 0 {
		return nil
	}
	changed := false
	var inUse []string
	listed := false
	var errs []error
	for _, name := range sets.List(sets.KeySet(retiring)) {
		if name == keep {
			delete(retiring, name)
			changed = true
			continue
		}
		if name == nc.Status.InstanceProfile || c.clock.Since(retiring[name]) < RetireAfter {
			// Status still names it when the patch that switched it failed.
			continue
		}
		p, err := nodeclass.GetInstanceProfile(ctx, c.iam, name)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if p == nil || !p.OwnedBy(c.clusterName, c.region, nc.Name) {
			delete(retiring, name)
			changed = true
			continue
		}
		if !listed {
			if inUse, err = c.profilesInUse(ctx); err != nil {
				errs = append(errs, err)
				break
			}
			listed = true
		}
		if usesProfile(inUse, p) {
			continue
		}
		if err := nodeclass.DeleteInstanceProfile(ctx, c.iam, name); err != nil {
			errs = append(errs, err)
			continue
		}
		log.FromContext(ctx).Info("deleted retired instance profile", "ec2nodeclass", nc.Name, "instanceProfile", name)
		delete(retiring, name)
		changed = true
	}
	if changed {
		errs = append(errs, c.writeRetiring(ctx, nc, retiring))
	}
	return errors.Join(errs...)
}

// profilesInUse are the instance-profile ARNs of the cluster's instances that are
// not terminated.
func (c *Controller) profilesInUse(ctx context.Context) ([]string, error) {
	var arns []string
	pages := ec2.NewDescribeInstancesPaginator(c.ec2, &ec2.DescribeInstancesInput{MaxResults: aws.Int32(1000), Filters: []ec2types.Filter{
		{Name: aws.String("tag:kubernetes.io/cluster/" + c.clusterName), Values: []string{"owned"}},
		{Name: aws.String("instance-state-name"), Values: []string{"pending", "running", "stopping", "stopped", "shutting-down"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the instances that use instance profiles, %w", err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				if inst.IamInstanceProfile != nil {
					arns = append(arns, aws.ToString(inst.IamInstanceProfile.Arn))
				}
			}
		}
	}
	return arns, nil
}

func usesProfile(arns []string, p *nodeclass.InstanceProfile) bool {
	for _, arn := range arns {
		// An ARN ends in instance-profile/<path><name>.
		if arn == p.ARN || strings.HasSuffix(arn, "/"+p.Name) {
			return true
		}
	}
	return false
}

// retiring reads the class's retiring profiles. An annotation that does not parse
// (edited by hand) reads as none: the profiles it named are left, never deleted
// while in use.
func (c *Controller) retiring(ctx context.Context, nc *awsv1.EC2NodeClass) map[string]time.Time {
	out := map[string]time.Time{}
	raw, ok := nc.Annotations[AnnotationRetiringInstanceProfiles]
	if !ok {
		return out
	}
	var stored map[string]time.Time
	if err := json.Unmarshal([]byte(raw), &stored); err != nil {
		log.FromContext(ctx).Error(err, "reading the retiring instance profiles; leaving them in IAM", "ec2nodeclass", nc.Name, "annotation", raw)
		return out
	}
	for k, v := range stored {
		out[k] = v
	}
	return out
}

func (c *Controller) writeRetiring(ctx context.Context, nc *awsv1.EC2NodeClass, retiring map[string]time.Time) error {
	patch := client.MergeFrom(nc.DeepCopy())
	if len(retiring) == 0 {
		delete(nc.Annotations, AnnotationRetiringInstanceProfiles)
	} else {
		b, err := json.Marshal(retiring)
		if err != nil {
			return err
		}
		if nc.Annotations == nil {
			nc.Annotations = map[string]string{}
		}
		nc.Annotations[AnnotationRetiringInstanceProfiles] = string(b)
	}
	return c.kube.Patch(ctx, nc, patch)
}

// finalize waits for the class's NodeClaims to go, then removes what it created.
func (c *Controller) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
	c.forget(nc)
	if !controllerutil.ContainsFinalizer(nc, Finalizer) {
		return reconcile.Result{}, nil
	}
	var claims v1.NodeClaimList
	if err := c.kube.List(ctx, &claims); err != nil {
		return reconcile.Result{}, err
	}
	for _, claim := range claims.Items {
		if ref := claim.Spec.NodeClassRef; ref != nil && ref.Kind == "EC2NodeClass" && ref.Name == nc.Name {
			return reconcile.Result{RequeueAfter: 5 * time.Second}, nil
		}
	}
	if c.LaunchTemplates != nil {
		if err := c.LaunchTemplates.DeleteForClass(ctx, nc.Name); err != nil {
			return reconcile.Result{}, err
		}
	}
	// Every profile the controller made for the class: in status, retiring, for its
	// role, and under the name profiles had before it carried the role.
	names := sets.KeySet(c.retiring(ctx, nc)).Insert(nodeclass.LegacyInstanceProfileName(c.clusterName, c.region, nc.Name))
	if nc.Status.InstanceProfile != "" {
		names.Insert(nc.Status.InstanceProfile)
	}
	if nc.Spec.Role != "" {
		names.Insert(nodeclass.InstanceProfileName(c.clusterName, c.region, nc.Name, nc.Spec.Role))
	}
	for _, name := range sets.List(names) {
		p, err := nodeclass.GetInstanceProfile(ctx, c.iam, name)
		if err != nil {
			return reconcile.Result{}, err
		}
		if p == nil || !p.OwnedBy(c.clusterName, c.region, nc.Name) {
			continue
		}
		if err := nodeclass.DeleteInstanceProfile(ctx, c.iam, name); err != nil {
			return reconcile.Result{}, err
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, Finalizer)
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Patch(ctx, nc, patch))
}
