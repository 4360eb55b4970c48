package state

import (
	"context"
	"encoding/json"
	"fmt"
	"k8s.io/client-go/util/retry"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// DisruptionAnnotationKey on a NodeClaim records the disruption it is a candidate
// of, once that disruption has launched replacements and waits for them: the
// candidates keep the karpenter.sh/disrupted taint meanwhile, and a process that
// starts (or becomes leader) then must know to finish the job rather than leave the
// nodes tainted beside their replacements, or to put the nodes back in service.
const DisruptionAnnotationKey = "dovetail.sh/disruption"

// Disruption is what DisruptionAnnotationKey holds.
type Disruption struct {
	// ID is the same on every candidate of one command.
	ID                string              `json:"id"`
	Reason            v1.DisruptionReason `json:"reason"`
	ConsolidationType string              `json:"consolidationType,omitempty"`
	Candidates        []string            `json:"candidates"`
	Replacements      []string            `json:"replacements"`
	StartedAt         metav1.Time         `json:"startedAt"`
	// DrainBound is a repair's bound on the candidates' drain, stamped as their
	// termination deadline when they are deleted; nil for none. Condition is the
	// node condition the repair is for, for its metrics.
	DrainBound *metav1.Duration `json:"drainBound,omitempty"`
	Condition  string           `json:"condition,omitempty"`
}

// Recorded reads the claim's disruption record, nil when it has none or it cannot be
// read (a record someone edited into nonsense is no record: the nodes go back into
// service, which is always safe).
func Recorded(nc *v1.NodeClaim) *Disruption {
	raw, ok := nc.Annotations[DisruptionAnnotationKey]
	if !ok {
		return nil
	}
	d := &Disruption{}
	if err := json.Unmarshal([]byte(raw), d); err != nil || d.ID == "" || len(d.Candidates) == 0 {
		return nil
	}
	return d
}

// Disrupting says whether a disruption has taken the claim: recorded on it, or its
// node (nil when it has none, or it is not known) tainted for it, the taint coming
// first. The static controller and predictions count such a claim apart.
func Disrupting(nc *v1.NodeClaim, node *corev1.Node) bool {
	return Recorded(nc) != nil || (node != nil && HasTaint(node, v1.DisruptedNoScheduleTaint))
}

// RecordDisruption writes the record on every candidate claim. A candidate that is
// gone is skipped; any other failure is returned, and the caller rolls back.
func RecordDisruption(ctx context.Context, kube client.Client, d *Disruption, candidates ...*v1.NodeClaim) error {
	raw, err := json.Marshal(d)
	if err != nil {
		return fmt.Errorf("encoding the disruption record, %w", err)
	}
	for _, nc := range candidates {
		if err := setAnnotation(ctx, kube, nc, string(raw)); err != nil {
			return fmt.Errorf("recording the disruption on nodeclaim %s, %w", nc.Name, err)
		}
	}
	return nil
}

// ClearDisruption removes the record from the claim, when the disruption is rolled
// back and the node stays in service.
// It reads the claim afresh: the caller's copy may predate the record.
func ClearDisruption(ctx context.Context, kube client.Client, nc *v1.NodeClaim) error {
	if err := setAnnotation(ctx, kube, nc, ""); err != nil {
		return fmt.Errorf("clearing the disruption record of nodeclaim %s, %w", nc.Name, err)
	}
	return nil
}

func setAnnotation(ctx context.Context, kube client.Client, nc *v1.NodeClaim, value string) error {
	current := &v1.NodeClaim{}
	if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
		return client.IgnoreNotFound(err)
	}
	if _, ok := current.Annotations[DisruptionAnnotationKey]; !ok && value == "" {
		return nil
	}
	patch := client.MergeFrom(current.DeepCopy())
	if value == "" {
		delete(current.Annotations, DisruptionAnnotationKey)
	} else {
		if current.Annotations == nil {
			current.Annotations = map[string]string{}
		}
		current.Annotations[DisruptionAnnotationKey] = value
	}
	return kube.Patch(ctx, current, patch)
}

// RecordedDisruptions are the disruptions recorded on claims still in service,
// oldest first, each with the candidates that carry its record.
func (v *View) RecordedDisruptions() []*Disruption {
	byID := map[string]*Disruption{}
	for i := range v.Claims {
		nc := &v.Claims[i]
		if nc.DeletionTimestamp != nil {
			continue
		}
		if d := Recorded(nc); d != nil {
			if _, seen := byID[d.ID]; !seen {
				byID[d.ID] = d
			}
		}
	}
	out := make([]*Disruption, 0, len(byID))
	for _, d := range byID {
		out = append(out, d)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].StartedAt.Equal(&out[j].StartedAt) {
			return out[i].StartedAt.Before(&out[j].StartedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// StaleDisrupted are the nodes tainted karpenter.sh/disrupted that nothing is
// disrupting: their claim is not being deleted, carries no disruption record, and
// is not among active (the claims this process is acting on now). They are what a
// crash or a leader change between tainting and recording leaves behind; Karpenter
// too takes the taint off such nodes on every pass.
func (v *View) StaleDisrupted(active sets.Set[string]) []*corev1.Node {
	var out []*corev1.Node
	for i := range v.Nodes {
		n := &v.Nodes[i]
		if n.DeletionTimestamp != nil || !HasTaint(n, v1.DisruptedNoScheduleTaint) {
			continue
		}
		nc := v.ClaimOf(n.Name)
		if nc == nil || nc.DeletionTimestamp != nil || active.Has(nc.Name) || Recorded(nc) != nil {
			continue
		}
		out = append(out, n)
	}
	return out
}

// HasTaint reports whether the node has the taint (key and effect).
func HasTaint(n *corev1.Node, taint corev1.Taint) bool {
	for i := range n.Spec.Taints {
		if n.Spec.Taints[i].MatchTaint(&taint) {
			return true
		}
	}
	return false
}

// NewDisruptionID names a command uniquely enough to group its candidates.
func NewDisruptionID(now time.Time, firstCandidate string) string {
	return fmt.Sprintf("%s-%d", firstCandidate, now.UnixNano())
}

// TightenDeadline sets the claim's termination deadline
// (karpenter.sh/nodeclaim-termination-timestamp) to at, unless it has an earlier one:
// a repair bounds the drain, and never extends a deadline someone else set. nc
// becomes the claim as it now is.
func TightenDeadline(ctx context.Context, kube client.Client, nc *v1.NodeClaim, at time.Time) error {
	err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		current := &v1.NodeClaim{}
		if err := kube.Get(ctx, client.ObjectKeyFromObject(nc), current); err != nil {
			return client.IgnoreNotFound(err)
		}
		if t, err := time.Parse(time.RFC3339, current.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey]); err == nil && !t.After(at) {
			return nil
		}
		patch := client.MergeFromWithOptions(current.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if current.Annotations == nil {
			current.Annotations = map[string]string{}
		}
		current.Annotations[v1.NodeClaimTerminationTimestampAnnotationKey] = at.UTC().Format(time.RFC3339)
		if err := kube.Patch(ctx, current, patch); err != nil {
			return err
		}
		// The caller acts on the claim next (deletes it, with a precondition).
		*nc = *current
		return nil
	})
	if err != nil {
		return fmt.Errorf("bounding the drain of nodeclaim %s, %w", nc.Name, err)
	}
	return nil
}
