// Package hash keeps the hashes on NodeClaims comparable with their NodePool's and
// EC2NodeClass's. A claim stamped under another hash version (by Karpenter, whose
// class hash differs from Dovetail's, or by an older Dovetail) is re-stamped with
// the current hashes rather than judged drifted, as Karpenter does when its hash
// version changes: taking over a running Karpenter cluster replaces no node.
package hash

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// Controller re-stamps claims whose hashes are of another version.
type Controller struct {
	kube client.Client
}

// NewController wires the controller.
func NewController(kube client.Client) *Controller { return &Controller{kube: kube} }

func (c *Controller) Name() string { return "nodeclaim.hash" }

func (c *Controller) Register(_ context.Context, mgr manager.Manager) error {
	return builder.ControllerManagedBy(mgr).Named(c.Name()).
		For(&v1.NodeClaim{}).
		Complete(reconcile.AsReconciler(mgr.GetClient(), c))
}

func (c *Controller) Reconcile(ctx context.Context, nc *v1.NodeClaim) (reconcile.Result, error) {
	// A claim still launching gets its hashes from the launch; writing it meanwhile
	// would only race the launch's own writes.
	if nc.DeletionTimestamp != nil || !meta.IsStatusConditionTrue(nc.Status.Conditions, v1.ConditionTypeInitialized) {
		return reconcile.Result{}, nil
	}
	want := map[string]string{}
	if np, err := c.pool(ctx, nc); err != nil {
		return reconcile.Result{}, err
	} else if np != nil && restampPool(nc, np) {
		want[v1.NodePoolHashAnnotationKey], want[v1.NodePoolHashVersionAnnotationKey] = np.Hash(), v1.NodePoolHashVersion
	}
	if class, err := c.class(ctx, nc); err != nil {
		return reconcile.Result{}, err
	} else if class != nil && nc.Annotations[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion {
		want[awsv1.AnnotationEC2NodeClassHashVersion] = awsv1.EC2NodeClassHashVersion
		// As Karpenter does when its hash version changes: a claim already drifted
		// keeps the hash it has, which no longer matches, so it stays drifted (a
		// class change Karpenter found before the switch is not forgotten).
		if meta.FindStatusCondition(nc.Status.Conditions, v1.ConditionTypeDrifted) == nil {
			want[awsv1.AnnotationEC2NodeClassHash] = class.Hash()
		}
	}
	if len(want) == 0 {
		return reconcile.Result{}, nil
	}
	before := nc.DeepCopy()
	patch := client.MergeFrom(before)
	if nc.Annotations == nil {
		nc.Annotations = map[string]string{}
	}
	for k, v := range want {
		nc.Annotations[k] = v
	}
	if err := c.kube.Patch(ctx, nc, patch); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(fmt.Errorf("re-stamping nodeclaim hashes, %w", err))
	}
	logger := log.FromContext(ctx).WithValues("nodeclaim", nc.Name, "annotations", want)
	if restamped(before, want) {
		logger.Info("re-stamped nodeclaim hashes of another version")
	} else {
		// A provider that stamps no class hash at launch (kwok) gets it here on
		// every claim: nothing was of another version.
		logger.V(1).Info("stamped nodeclaim hashes missing since launch")
	}
	return reconcile.Result{}, nil
}

// restamped reports whether any of the hashes replaced one the claim had, rather
// than filling in one it lacked.
func restamped(before *v1.NodeClaim, want map[string]string) bool {
	for k := range want {
		if _, had := before.Annotations[k]; had {
			return true
		}
	}
	return false
}

// restampPool reports whether the claim's pool hash is of another version, or is
// the hash an older Dovetail wrote under the current version while the template
// is unchanged since.
func restampPool(nc *v1.NodeClaim, np *v1.NodePool) bool {
	if nc.Annotations[v1.NodePoolHashVersionAnnotationKey] != v1.NodePoolHashVersion {
		return true
	}
	h := nc.Annotations[v1.NodePoolHashAnnotationKey]
	return h != np.Hash() && h == np.LegacyHash()
}

func (c *Controller) pool(ctx context.Context, nc *v1.NodeClaim) (*v1.NodePool, error) {
	name := nc.Labels[v1.LabelNodePool]
	if name == "" {
		return nil, nil
	}
	np := &v1.NodePool{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: name}, np); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return np, nil
}

func (c *Controller) class(ctx context.Context, nc *v1.NodeClaim) (*awsv1.EC2NodeClass, error) {
	ref := nc.Spec.NodeClassRef
	if ref == nil || ref.Group != awsv1.Group || ref.Kind != "EC2NodeClass" {
		return nil, nil
	}
	class := &awsv1.EC2NodeClass{}
	if err := c.kube.Get(ctx, client.ObjectKey{Name: ref.Name}, class); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return class, nil
}
