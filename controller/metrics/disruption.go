package metrics

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Termination modes, as Karpenter v1.15 labels a disruption by how its claim's
// pods may be drained.
const (
	TerminationModeGraceful = "graceful"
	TerminationModeEventual = "eventual"
	TerminationModeForceful = "forceful"
)

// TerminationMode is a claim's mode from its terminationGracePeriod: none waits for
// every pod (graceful), zero or less drains nothing (forceful), any other bounds
// the drain (eventual).
func TerminationMode(terminationGracePeriod *metav1.Duration) string {
	switch {
	case terminationGracePeriod == nil:
		return TerminationModeGraceful
	case terminationGracePeriod.Duration <= 0:
		return TerminationModeForceful
	}
	return TerminationModeEventual
}

// Disruption is one claim disrupted, labelled as Karpenter labels it.
type Disruption struct {
	// Reason is lower snake case: underutilized, drifted, expired, unhealthy, ...
	Reason, NodePool, CapacityType string
	// ConsolidationPolicy is the pool's, snake case, for consolidation only.
	ConsolidationPolicy string
	TerminationMode     string
}

// Record counts the claim in karpenter_nodeclaims_disrupted_total and, when
// pods is not negative, its reschedulable pods in
// karpenter_pods_disruption_initiated_total (Karpenter counts no pods for
// interruptions).
func (d Disruption) Record(pods int) {
	labels := []string{d.Reason, d.NodePool, d.CapacityType, d.ConsolidationPolicy, d.TerminationMode}
	NodeClaimsDisrupted.WithLabelValues(labels...).Inc()
	if pods >= 0 {
		PodsDisruptionInitiated.WithLabelValues(labels...).Add(float64(pods))
	}
}

// SnakeCase writes a CamelCase name as Karpenter's labels do:
// WhenEmptyOrUnderutilized is when_empty_or_underutilized.
func SnakeCase(s string) string {
	var b strings.Builder
	for i, r := range s {
		if r >= 'A' && r <= 'Z' {
			if i > 0 {
				b.WriteByte('_')
			}
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
