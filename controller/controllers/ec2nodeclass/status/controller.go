// Package status reconciles an EC2NodeClass: it resolves the subnets, security
// groups and images its selectors match, ensures the instance profile for its role,
// and reports each in status with a condition a person can act on. Its finalizer
// removes the instance profile it created once no NodeClaim uses the class.
package status

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
	"github.com/dovetail-sh/dovetail/controller/cloudprovider/aws/nodeclass"
)

// Finalizer guards the resources the controller creates for a class.
const Finalizer = awsv1.Group + "/termination"

// Controller is the EC2NodeClass status controller.
type Controller struct {
	kube        client.Client
	ec2         nodeclass.EC2API
	amis        *nodeclass.AMIResolver
	iam         nodeclass.IAMAPI
	clusterName string
	region      string
	clock       clock.Clock
	// LaunchTemplates, when set, are deleted with the class.
	LaunchTemplates interface {
		DeleteForClass(ctx context.Context, class string) error
	}
}

// NewController wires the controller.
func NewController(kube client.Client, ec2 nodeclass.EC2API, amis *nodeclass.AMIResolver, iam nodeclass.IAMAPI, clusterName, region string, clk clock.Clock) *Controller {
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
	patch := client.MergeFrom(nc.DeepCopy())
	ready := true
	record := func(condition string, err error) {
		status, reason, message := metav1.ConditionTrue, condition, ""
		if err != nil {
			status, reason, message, ready = metav1.ConditionFalse, condition+"NotReady", err.Error(), false
		}
		meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: condition, Status: status, Reason: reason,
			Message: message, ObservedGeneration: nc.Generation, LastTransitionTime: metav1.NewTime(c.clock.Now())})
	}

	subnets, err := nodeclass.Subnets(ctx, c.ec2, nc.Spec.SubnetSelectorTerms)
	nc.Status.Subnets = nil
	for _, s := range subnets {
		nc.Status.Subnets = append(nc.Status.Subnets, s.Subnet)
	}
	record(awsv1.ConditionTypeSubnetsReady, err)

	groups, err := nodeclass.SecurityGroups(ctx, c.ec2, nc.Spec.SecurityGroupSelectorTerms)
	nc.Status.SecurityGroups = groups
	record(awsv1.ConditionTypeSecurityGroupsReady, err)

	amis, err := c.amis.Resolve(ctx, nc.Spec.AMISelectorTerms)
	nc.Status.AMIs = amis
	record(awsv1.ConditionTypeAMIsReady, err)

	profile, err := c.instanceProfile(ctx, nc)
	nc.Status.InstanceProfile = profile
	record(awsv1.ConditionTypeInstanceProfileReady, err)

	readyErr := error(nil)
	if !ready {
		readyErr = fmt.Errorf("one or more of SubnetsReady, SecurityGroupsReady, AMIsReady, InstanceProfileReady is False; see their messages")
	}
	record(awsv1.ConditionTypeReady, readyErr)
	if err := c.kube.Status().Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	// Selectors match cloud resources that change without telling us: look again.
	if ready {
		return reconcile.Result{RequeueAfter: 5 * time.Minute}, nil
	}
	return reconcile.Result{RequeueAfter: 30 * time.Second}, nil
}

func (c *Controller) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass) (string, error) {
	if nc.Spec.InstanceProfile != nil {
		return *nc.Spec.InstanceProfile, nil
	}
	name := nodeclass.InstanceProfileName(c.clusterName, c.region, nc.Name)
	tags := map[string]string{
		"kubernetes.io/cluster/" + c.clusterName: "owned",
		"eks:eks-cluster-name":                   c.clusterName,
		v1.LabelEC2NodeClass:                     nc.Name,
		v1.LabelTopologyRegion:                   c.region,
	}
	if err := nodeclass.EnsureInstanceProfile(ctx, c.iam, name, nc.Spec.Role, tags); err != nil {
		return "", err
	}
	return name, nil
}

// finalize waits for the class's NodeClaims to go, then removes what it created.
func (c *Controller) finalize(ctx context.Context, nc *awsv1.EC2NodeClass) (reconcile.Result, error) {
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
	if nc.Spec.InstanceProfile == nil {
		if err := nodeclass.DeleteInstanceProfile(ctx, c.iam, nodeclass.InstanceProfileName(c.clusterName, c.region, nc.Name)); err != nil {
			return reconcile.Result{}, err
		}
	}
	patch := client.MergeFrom(nc.DeepCopy())
	controllerutil.RemoveFinalizer(nc, Finalizer)
	return reconcile.Result{}, client.IgnoreNotFound(c.kube.Patch(ctx, nc, patch))
}
