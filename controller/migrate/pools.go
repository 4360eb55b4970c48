package migrate

import (
	"fmt"
)

// provisioner converts a karpenter.sh/v1alpha5 Provisioner to a NodePool.
func (c *converter) provisioner(d map[string]any) (*Object, error) {
	name := nameOf(d)
	old := mapOf(d["spec"])
	o := newObject(groupCore, "NodePool", d)
	tmpl := map[string]any{}
	tmplSpec := map[string]any{}
	tmplMeta := map[string]any{}
	for _, k := range []string{"labels", "annotations"} {
		if v, ok := old[k]; ok {
			tmplMeta[k] = v
		}
	}
	for _, k := range []string{"taints", "startupTaints"} {
		if v, ok := old[k]; ok {
			tmplSpec[k] = v
		}
	}
	tmplSpec["requirements"] = requirements(old["requirements"])
	if w, ok := old["weight"]; ok {
		o.spec()["weight"] = w
	}
	if l := dig(old, "limits", "resources"); l != nil {
		o.spec()["limits"] = l
	}

	// Disruption: v1alpha5 either deleted empty nodes after a TTL or consolidated;
	// v1 says both with one policy and a delay.
	disruption := map[string]any{}
	empty, hasEmpty := old["ttlSecondsAfterEmpty"]
	consolidate, _ := dig(old, "consolidation", "enabled").(bool)
	switch {
	case hasEmpty && consolidate:
		return nil, fmt.Errorf("Provisioner %s sets both ttlSecondsAfterEmpty and consolidation.enabled, which v1alpha5 itself refused; keep one", name)
	case consolidate:
		disruption["consolidationPolicy"], disruption["consolidateAfter"] = "WhenEmptyOrUnderutilized", "0s"
		o.note("consolidation.enabled: true became consolidationPolicy WhenEmptyOrUnderutilized with consolidateAfter 0s (consolidate as soon as possible, as v1alpha5 did)")
	case hasEmpty:
		after, ok := seconds(empty)
		if !ok {
			return nil, fmt.Errorf("Provisioner %s: ttlSecondsAfterEmpty %v is not a number of seconds", name, empty)
		}
		disruption["consolidationPolicy"], disruption["consolidateAfter"] = "WhenEmpty", after
		o.note("ttlSecondsAfterEmpty: %v became consolidationPolicy WhenEmpty with consolidateAfter %s", empty, after)
	default:
		disruption["consolidationPolicy"], disruption["consolidateAfter"] = "WhenEmpty", "Never"
		o.note("neither ttlSecondsAfterEmpty nor consolidation was set, so nodes were never removed: consolidateAfter Never keeps that (v1 would otherwise consolidate)")
	}
	o.spec()["disruption"] = disruption

	if ttl, ok := old["ttlSecondsUntilExpired"]; ok {
		after, ok := seconds(ttl)
		if !ok {
			return nil, fmt.Errorf("Provisioner %s: ttlSecondsUntilExpired %v is not a number of seconds", name, ttl)
		}
		tmplSpec["expireAfter"] = after
		o.note("ttlSecondsUntilExpired: %v became template expireAfter %s", ttl, after)
	} else {
		tmplSpec["expireAfter"] = "Never"
		o.note("no ttlSecondsUntilExpired, so nodes never expired: expireAfter Never keeps that (v1 defaults to 720h)")
	}

	className := ""
	switch {
	case dig(old, "providerRef", "name") != nil:
		className = str(old["providerRef"], "name")
	case old["provider"] != nil:
		className = name
		if err := c.inlineProvider(name, mapOf(old["provider"])); err != nil {
			return nil, err
		}
		o.note("the inline provider block became EC2NodeClass %s", name)
	default:
		return nil, fmt.Errorf("Provisioner %s has neither providerRef nor provider; add providerRef.name naming its AWSNodeTemplate", name)
	}
	tmplSpec["nodeClassRef"] = map[string]any{"group": groupAWS, "kind": "EC2NodeClass", "name": className}
	if k := mapOf(old["kubeletConfiguration"]); k != nil {
		if err := c.moveKubelet(o, className, k); err != nil {
			return nil, err
		}
	}
	for _, dropped := range []string{"consolidation", "ttlSecondsAfterEmpty", "ttlSecondsUntilExpired", "limits", "weight", "labels", "annotations", "taints", "startupTaints", "requirements", "providerRef", "provider", "kubeletConfiguration"} {
		delete(old, dropped)
	}
	for k := range old {
		o.note("spec.%s has no v1 equivalent and was dropped", k)
	}
	if len(tmplMeta) > 0 {
		tmpl["metadata"] = tmplMeta
	}
	tmpl["spec"] = tmplSpec
	o.spec()["template"] = tmpl
	return o, nil
}

// nodePoolV1beta1 converts a karpenter.sh/v1beta1 NodePool.
func (c *converter) nodePoolV1beta1(d map[string]any) (*Object, error) {
	name := nameOf(d)
	o := newObject(groupCore, "NodePool", d)
	old := mapOf(d["spec"])
	for k, v := range old {
		o.spec()[k] = v
	}
	tmplSpec := mapOf(dig(o.spec(), "template", "spec"))
	if tmplSpec == nil {
		return nil, fmt.Errorf("NodePool %s has no spec.template.spec", name)
	}
	ref := mapOf(tmplSpec["nodeClassRef"])
	className := str(ref, "name")
	if className == "" {
		return nil, fmt.Errorf("NodePool %s: spec.template.spec.nodeClassRef.name is not set", name)
	}
	tmplSpec["nodeClassRef"] = map[string]any{"group": groupAWS, "kind": "EC2NodeClass", "name": className}
	disruption := mapOf(o.spec()["disruption"])
	if disruption == nil {
		disruption = map[string]any{}
		o.spec()["disruption"] = disruption
	}
	if exp, ok := disruption["expireAfter"]; ok {
		tmplSpec["expireAfter"] = exp
		delete(disruption, "expireAfter")
		o.note("disruption.expireAfter moved to spec.template.spec.expireAfter")
	}
	switch disruption["consolidationPolicy"] {
	case "WhenUnderutilized", nil:
		disruption["consolidationPolicy"] = "WhenEmptyOrUnderutilized"
		if _, ok := disruption["consolidateAfter"]; !ok {
			disruption["consolidateAfter"] = "0s"
		}
		o.note("consolidationPolicy WhenUnderutilized became WhenEmptyOrUnderutilized with consolidateAfter %v", disruption["consolidateAfter"])
	}
	if k := mapOf(tmplSpec["kubelet"]); k != nil {
		delete(tmplSpec, "kubelet")
		if err := c.moveKubelet(o, className, k); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// requirements keeps v1alpha5 requirements as they are: the operators and keys are
// v1's, and v1 requires the list to exist.
func requirements(v any) any {
	if v == nil {
		return []any{}
	}
	return v
}

// moveKubelet puts a pool's kubelet settings on its class, where v1 reads them.
func (c *converter) moveKubelet(o *Object, class string, k map[string]any) error {
	if prev, ok := c.kubelet[class]; ok && fmt.Sprint(prev) != fmt.Sprint(k) {
		return fmt.Errorf("%s %s and %s set different kubelet settings but share EC2NodeClass %s; v1 keeps kubelet settings on the class, so give one of them its own class first", o.Kind, o.Name, c.kubeletFrom[class], class)
	}
	c.kubelet[class], c.kubeletFrom[class] = k, o.Kind+" "+o.Name
	o.note("kubelet settings moved to EC2NodeClass %s (v1 keeps them on the class)", class)
	return nil
}
