package scheduling

import (
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"

	v1 "github.com/dovetail-sh/dovetail/controller/apis/v1"
)

// podInfo is the engine's view of one pending pod: what it requests and the
// constraints it places, with preferences held as requirements until they have to be
// relaxed.
type podInfo struct {
	pod      *corev1.Pod
	key      string // namespace/name
	requests Resources
	// requirements is the current (possibly relaxed) set the pod's node must meet.
	requirements Requirements
	// ownRequirements are requirements without those of the pod's volumes: the
	// domains a topology spread counts come from the pod's own node affinity, as
	// kube-scheduler counts them.
	ownRequirements Requirements
	// volume is what the pod's volumes require of its node (a bound volume's zone),
	// as alternatives; vterm is the one in use.
	volume VolumeTopology
	vterm  int
	// requiredTerms are the OR-ed required node-affinity terms; term is the index in use.
	requiredTerms []Requirements
	term          int
	// preferredTerms are the preferred node-affinity terms, heaviest first; the first
	// `preferred` of them are currently enforced.
	preferredTerms []Requirements
	preferred      int
	tolerations    []corev1.Toleration
	hostPorts      []hostPort
	// attached are the volumes the pod attaches, by CSI driver.
	attached AttachedVolumes
	// topology lists the groups whose constraints this pod owns, including relaxable
	// ones (ScheduleAnyway spreads, preferred affinities) until they are relaxed.
	topology []*topologyGroup
	// class identifies pods with identical scheduling constraints, for caches.
	class  int
	placed bool
	// absorbed is set when the existing nodes' free room is expected to take the
	// pod (markAbsorbed).
	absorbed bool
	// pools are the indexes of the NodePools that admit the pod, for demand.
	pools []int
	// bucket holds the pod's fellow replicas.
	bucket *bucket
	// matched caches the topology groups that select the pod, valid while
	// matchedGeneration is one past the topology's generation (zero: never set).
	matched           []*topologyGroup
	matchedGeneration int
}

type hostPort struct {
	protocol corev1.Protocol
	ip       string
	port     int32
}

func newPodInfo(pod *corev1.Pod, volume VolumeTopology) (*podInfo, error) {
	p := &podInfo{pod: pod, key: pod.Namespace + "/" + pod.Name, requests: PodRequests(pod), tolerations: pod.Spec.Tolerations, volume: volume}
	base := Requirements{}
	for k, v := range pod.Spec.NodeSelector {
		base.Add(MustRequirement(k, v1.OpIn, v))
	}
	if aff := pod.Spec.Affinity; aff != nil && aff.NodeAffinity != nil {
		if req := aff.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution; req != nil {
			for _, term := range req.NodeSelectorTerms {
				rs, err := FromNodeSelectorTerm(term)
				if err != nil {
					return nil, fmt.Errorf("pod %s: node affinity: %w", p.key, err)
				}
				p.requiredTerms = append(p.requiredTerms, rs)
			}
		}
		prefs := append([]corev1.PreferredSchedulingTerm(nil), aff.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution...)
		sort.SliceStable(prefs, func(i, j int) bool { return prefs[i].Weight > prefs[j].Weight })
		for _, pref := range prefs {
			rs, err := FromNodeSelectorTerm(pref.Preference)
			if err != nil {
				return nil, fmt.Errorf("pod %s: preferred node affinity: %w", p.key, err)
			}
			p.preferredTerms = append(p.preferredTerms, rs)
		}
	}
	if len(p.requiredTerms) == 0 {
		p.requiredTerms = []Requirements{{}}
	}
	for i := range p.requiredTerms {
		merged := base.Copy()
		for _, r := range p.requiredTerms[i] {
			merged.Add(r)
		}
		p.requiredTerms[i] = merged
	}
	p.preferred = len(p.preferredTerms)
	p.rebuildRequirements()
	p.hostPorts = podHostPorts(pod)
	return p, nil
}

func (p *podInfo) rebuildRequirements() {
	own := p.requiredTerms[p.term].Copy()
	all := own.Copy()
	if len(p.volume) > 0 {
		for _, r := range p.volume[p.vterm] {
			all.Add(r)
		}
	}
	for _, pref := range p.preferredTerms[:p.preferred] {
		// A preference that contradicts the required terms or the volumes can never
		// hold; skip it rather than make the pod unschedulable.
		if all.Intersects(pref) != nil {
			continue
		}
		for _, r := range pref {
			own.Add(r)
			all.Add(r)
		}
	}
	p.requirements, p.ownRequirements = all, own
}

// relax drops the weakest constraint that is only a preference, or moves to the next
// OR-ed required term. It returns false when nothing is left to relax. The order
// follows Karpenter: preferred node affinity, then preferred pod (anti-)affinity and
// ScheduleAnyway spreads, then the volumes' next alternative, then the next required
// node-affinity term.
func (p *podInfo) relax() bool {
	if p.preferred > 0 {
		p.preferred--
		p.rebuildRequirements()
		return true
	}
	for i, g := range p.topology {
		if g.preference {
			p.topology = append(p.topology[:i:i], p.topology[i+1:]...)
			return true
		}
	}
	if p.vterm+1 < len(p.volume) {
		p.vterm++
		p.preferred = len(p.preferredTerms)
		p.rebuildRequirements()
		return true
	}
	if p.term+1 < len(p.requiredTerms) {
		p.term++
		p.vterm = 0
		p.preferred = len(p.preferredTerms)
		p.rebuildRequirements()
		return true
	}
	return false
}

// needsHostnameAffinity reports whether the pod must run beside pods already placed.
func (p *podInfo) needsHostnameAffinity() bool {
	for _, g := range p.topology {
		if g.kind == topologyAffinity && !g.preference && g.key == v1.LabelHostname && g.total > 0 {
			return true
		}
	}
	return false
}

// toleratesAll reports whether the pod tolerates every NoSchedule/NoExecute taint,
// and if not, names the first it does not.
func toleratesAll(tolerations []corev1.Toleration, taints []corev1.Taint) error {
	for i := range taints {
		t := &taints[i]
		if t.Effect == corev1.TaintEffectPreferNoSchedule {
			continue
		}
		tolerated := false
		for j := range tolerations {
			if tolerations[j].ToleratesTaint(t) {
				tolerated = true
				break
			}
		}
		if !tolerated {
			return fmt.Errorf("did not tolerate taint %s=%s:%s", t.Key, t.Value, t.Effect)
		}
	}
	return nil
}

// conflictsWith reports whether two sets of host ports collide. A wildcard IP
// (empty or 0.0.0.0) collides with every IP on the same port and protocol.
func hostPortsConflict(a, b []hostPort) bool {
	for _, x := range a {
		for _, y := range b {
			if x.port != y.port || x.protocol != y.protocol {
				continue
			}
			if x.ip == y.ip || isWildcardIP(x.ip) || isWildcardIP(y.ip) {
				return true
			}
		}
	}
	return false
}

func isWildcardIP(ip string) bool { return ip == "" || ip == "0.0.0.0" || ip == "::" }

// podHostPorts lists the host ports a pod's containers claim.
func podHostPorts(pod *corev1.Pod) []hostPort {
	var out []hostPort
	for _, c := range pod.Spec.Containers {
		for _, port := range c.Ports {
			if port.HostPort > 0 {
				proto := port.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				out = append(out, hostPort{protocol: proto, ip: port.HostIP, port: port.HostPort})
			}
		}
	}
	return out
}
