package hash

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	fakeclient "sigs.k8s.io/controller-runtime/pkg/client/fake"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

func objects() (*v1.NodePool, *awsv1.EC2NodeClass) {
	np := &v1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	np.Spec.Template.Spec.NodeClassRef = &v1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: "default"}
	np.Spec.Template.Labels = map[string]string{"team": "search"}
	class := &awsv1.EC2NodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: awsv1.EC2NodeClassSpec{Role: "nodes"}}
	return np, class
}

func claimWith(np *v1.NodePool, annotations map[string]string) *v1.NodeClaim {
	nc := &v1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "default-a", Labels: map[string]string{v1.LabelNodePool: np.Name}, Annotations: annotations},
		Spec: v1.NodeClaimSpec{NodeClassRef: np.Spec.Template.Spec.NodeClassRef}}
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeInitialized, Status: metav1.ConditionTrue, Reason: "Initialized"})
	return nc
}

// A claim still launching is left to its launch, which writes its hashes.
func TestLaunchingClaimIsLeftAlone(t *testing.T) {
	np, class := objects()
	nc := claimWith(np, nil)
	nc.Status.Conditions = nil
	if got := reconciled(t, nc, np, class); len(got) != 0 {
		t.Errorf("a launching claim was stamped: %v", got)
	}
}

func reconciled(t *testing.T, nc *v1.NodeClaim, objs ...client.Object) map[string]string {
	t.Helper()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1.AddToScheme, awsv1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	kube := fakeclient.NewClientBuilder().WithScheme(scheme).WithObjects(append(objs, nc)...).Build()
	if _, err := NewController(kube).Reconcile(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	got := &v1.NodeClaim{}
	if err := kube.Get(context.Background(), client.ObjectKeyFromObject(nc), got); err != nil {
		t.Fatal(err)
	}
	return got.Annotations
}

func TestClaimsOfAnotherHashVersionAreRestampedNotDrifted(t *testing.T) {
	np, class := objects()
	current := map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
		awsv1.AnnotationEC2NodeClassHash: class.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion}
	cases := map[string]struct {
		stamped map[string]string
		want    map[string]string
	}{
		"as Karpenter stamps them: the pool hash is the same, the class hash is of its own version": {
			stamped: map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.AnnotationEC2NodeClassHash: "4207361830128913287", awsv1.AnnotationEC2NodeClassHashVersion: "v4"},
			want: current,
		},
		"an older Dovetail's sha256 stamp of the same template": {
			stamped: map[string]string{v1.NodePoolHashAnnotationKey: np.LegacyHash(), v1.NodePoolHashVersionAnnotationKey: "v3",
				awsv1.AnnotationEC2NodeClassHash: class.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion},
			want: current,
		},
		"no stamps at all": {stamped: nil, want: current},
		// A claim of the current version whose pool changed since is drifted: its
		// stamp stays for disruption to see.
		"the current version with another template's hash": {
			stamped: map[string]string{v1.NodePoolHashAnnotationKey: "12345", v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
				awsv1.AnnotationEC2NodeClassHash: class.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion},
			want: map[string]string{v1.NodePoolHashAnnotationKey: "12345", v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
				awsv1.AnnotationEC2NodeClassHash: class.Hash(), awsv1.AnnotationEC2NodeClassHashVersion: awsv1.EC2NodeClassHashVersion},
		},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got := reconciled(t, claimWith(np, c.stamped), np.DeepCopy(), class.DeepCopy())
			for k, v := range c.want {
				if got[k] != v {
					t.Errorf("%s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// A claim Karpenter found drifted keeps its class hash when its version is re-stamped,
// as Karpenter's own re-stamp does: the class change is not forgotten.
func TestDriftedClaimKeepsItsClassHash(t *testing.T) {
	np, class := objects()
	nc := claimWith(np, map[string]string{v1.NodePoolHashAnnotationKey: np.Hash(), v1.NodePoolHashVersionAnnotationKey: v1.NodePoolHashVersion,
		awsv1.AnnotationEC2NodeClassHash: "4207361830128913287", awsv1.AnnotationEC2NodeClassHashVersion: "v6"})
	meta.SetStatusCondition(&nc.Status.Conditions, metav1.Condition{Type: v1.ConditionTypeDrifted, Status: metav1.ConditionTrue, Reason: "NodeClassDrift"})
	got := reconciled(t, nc, np, class)
	if got[awsv1.AnnotationEC2NodeClassHashVersion] != awsv1.EC2NodeClassHashVersion || got[awsv1.AnnotationEC2NodeClassHash] != "4207361830128913287" {
		t.Errorf("a drifted claim's class hash annotations became %s=%q %s=%q; want the version re-stamped and the hash kept",
			awsv1.AnnotationEC2NodeClassHashVersion, got[awsv1.AnnotationEC2NodeClassHashVersion], awsv1.AnnotationEC2NodeClassHash, got[awsv1.AnnotationEC2NodeClassHash])
	}
}
