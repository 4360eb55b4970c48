package simulate

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dovetail-sh/dovetail/controller/apis/scheme"
)

// SnapshotKinds are what a snapshot for a prediction should hold, as kubectl
// names them: what ReadLive reads.
const SnapshotKinds = "nodes,nodeclaims,nodepools,ec2nodeclasses,nodeoverlays,capacitybuffers,provisioningrequests,commitments,pods,pdb,daemonsets,deploy,rs,sts,svc,podtemplates,pvc,pv,storageclasses,csinodes"

// liveKinds are what `dovetail explain` reads from a live cluster: what
// `kubectl get` would be asked for a snapshot, and the objects that price it.
var liveKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "NodeList"}, {Group: "karpenter.sh", Version: "v1", Kind: "NodeClaimList"}, {Group: "karpenter.sh", Version: "v1", Kind: "NodePoolList"},
	{Version: "v1", Kind: "PodList"}, {Group: "policy", Version: "v1", Kind: "PodDisruptionBudgetList"}, {Group: "apps", Version: "v1", Kind: "DaemonSetList"},
	{Version: "v1", Kind: "PersistentVolumeClaimList"}, {Version: "v1", Kind: "PersistentVolumeList"}, {Group: "storage.k8s.io", Version: "v1", Kind: "StorageClassList"}, {Group: "storage.k8s.io", Version: "v1", Kind: "CSINodeList"},
	{Group: "karpenter.sh", Version: "v1alpha1", Kind: "NodeOverlayList"}, {Group: "dovetail.sh", Version: "v1alpha1", Kind: "CommitmentList"}, {Group: "karpenter.k8s.aws", Version: "v1", Kind: "EC2NodeClassList"},
}

// liveKindsBesides are read when the user may list them, and predicted without
// otherwise (a role that reads nodes and pools need not read every workload):
// CapacityBuffers and ProvisioningRequests and what they name, whose room is kept
// in every prediction as the controller keeps it; workloads, read live for spread selectors and not made
// into pods (their pods are listed above); the controller's Deployment, which
// gives its settings.
var liveKindsBesides = []schema.GroupVersionKind{
	{Group: "autoscaling.x-k8s.io", Version: "v1beta1", Kind: "CapacityBufferList"}, {Group: "autoscaling.x-k8s.io", Version: "v1", Kind: "ProvisioningRequestList"}, {Version: "v1", Kind: "PodTemplateList"},
	{Group: "apps", Version: "v1", Kind: "DeploymentList"}, {Group: "apps", Version: "v1", Kind: "ReplicaSetList"}, {Group: "apps", Version: "v1", Kind: "StatefulSetList"},
	{Version: "v1", Kind: "ServiceList"},
}

// ReadLive reads what a snapshot holds from a live cluster, as kubectl would
// print it, so it is read exactly as a snapshot file is.
func ReadLive(ctx context.Context, cfg *rest.Config, in *Inputs) error {
	s := scheme.New()
	cl, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return fmt.Errorf("connecting to the cluster, %w", err)
	}
	var docs bytes.Buffer
	var forbidden []string
	for _, gvk := range append(append([]schema.GroupVersionKind{}, liveKinds...), liveKindsBesides...) {
		obj, err := s.New(gvk)
		if err != nil {
			return err
		}
		list := obj.(client.ObjectList)
		if err := cl.List(ctx, list); err != nil {
			if meta.IsNoMatchError(err) {
				// A CRD not installed (no Commitments, no NodeOverlays) holds nothing.
				continue
			}
			if apierrors.IsForbidden(err) && slices.Contains(liveKindsBesides, gvk) {
				forbidden = append(forbidden, strings.TrimSuffix(gvk.Kind, "List"))
				continue
			}
			return fmt.Errorf("listing %s, %w", strings.TrimSuffix(gvk.Kind, "List"), err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return err
		}
		item := schema.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: strings.TrimSuffix(gvk.Kind, "List")}
		for _, o := range items {
			o.GetObjectKind().SetGroupVersionKind(item)
			if err := writeDoc(&docs, o); err != nil {
				return err
			}
		}
	}
	if err := in.Read(&docs, "the live cluster"); err != nil {
		return err
	}
	if len(forbidden) > 0 {
		note := fmt.Sprintf("the live cluster: you may not list %s; predicted without them (without Deployments, under the controller's default settings; without CapacityBuffers, keeping no room for them; without workloads and Services, without the default spread's selectors)", strings.Join(forbidden, ", "))
		in.Unreadable = append(in.Unreadable, note)
		in.Warnings = append(in.Warnings, note)
	}
	return nil
}

func writeDoc(w io.Writer, o runtime.Object) error {
	b, err := yaml.Marshal(o)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(w, "---\n%s", b)
	return err
}
