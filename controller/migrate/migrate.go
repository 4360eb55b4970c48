// Package migrate converts the manifests older Karpenter versions took
// (karpenter.sh/v1alpha5 Provisioners, karpenter.k8s.aws/v1alpha1 AWSNodeTemplates,
// and the v1beta1 NodePools and EC2NodeClasses) into the karpenter.sh/v1 NodePools and
// karpenter.k8s.aws/v1 EC2NodeClasses Dovetail (and Karpenter v1) read. It is pure:
// objects in, objects and the choices it made out. Every conversion that is not a
// rename is reported as a note on the object it concerns.
package migrate

import (
	"fmt"
	"sort"
	"strings"
)

// Options are what the old manifests cannot say.
type Options struct {
	// Role or InstanceProfile is the nodes' IAM identity: a v1 EC2NodeClass needs
	// exactly one, and old templates named an instance profile or nothing.
	Role, InstanceProfile string
}

// Object is one converted object with the notes on what the conversion chose.
type Object struct {
	Kind, Name string
	// Body is the whole v1 object (apiVersion, kind, metadata, spec).
	Body  map[string]any
	Notes []string
}

// Result is a conversion's output, in input order, classes after the pools that
// first named them.
type Result struct {
	Objects []*Object
}

const (
	groupCore = "karpenter.sh"
	groupAWS  = "karpenter.k8s.aws"
)

// Convert converts the documents (each a decoded Kubernetes object). Objects of
// kinds it does not know are an error naming them, not silently dropped.
func Convert(docs []map[string]any, opts Options) (*Result, error) {
	c := &converter{opts: opts, classes: map[string]*Object{}, kubelet: map[string]any{}, kubeletFrom: map[string]string{}}
	var errs []string
	// Classes first, so pools can move their kubelet settings onto them.
	for _, d := range docs {
		var err error
		switch apiKind(d) {
		case "karpenter.k8s.aws/v1alpha1/AWSNodeTemplate":
			err = c.awsNodeTemplate(d)
		case "karpenter.k8s.aws/v1beta1/EC2NodeClass":
			err = c.ec2NodeClassV1beta1(d)
		}
		if err != nil {
			errs = append(errs, err.Error())
		}
	}
	var pools []*Object
	for _, d := range docs {
		var (
			o   *Object
			err error
		)
		switch k := apiKind(d); k {
		case "karpenter.k8s.aws/v1alpha1/AWSNodeTemplate", "karpenter.k8s.aws/v1beta1/EC2NodeClass":
			continue
		case "karpenter.sh/v1alpha5/Provisioner":
			o, err = c.provisioner(d)
		case "karpenter.sh/v1beta1/NodePool":
			o, err = c.nodePoolV1beta1(d)
		case "karpenter.sh/v1/NodePool", "karpenter.k8s.aws/v1/EC2NodeClass":
			err = fmt.Errorf("%s %s is already karpenter v1: apply it as it is", kindOf(d), nameOf(d))
		default:
			err = fmt.Errorf("%s %s (%s) is not a Karpenter Provisioner, AWSNodeTemplate, or v1beta1 NodePool or EC2NodeClass; remove it from the input", kindOf(d), nameOf(d), apiVersionOf(d))
		}
		if err != nil {
			errs = append(errs, err.Error())
			continue
		}
		pools = append(pools, o)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	res := &Result{}
	seen := map[string]bool{}
	for _, p := range pools {
		res.Objects = append(res.Objects, p)
		ref := str(dig(p.Body, "spec", "template", "spec", "nodeClassRef"), "name")
		if cl, ok := c.classes[ref]; ok && !seen[ref] {
			seen[ref] = true
			res.Objects = append(res.Objects, cl)
		}
	}
	var rest []string
	for name := range c.classes {
		if !seen[name] {
			rest = append(rest, name)
		}
	}
	sort.Strings(rest)
	for _, name := range rest {
		res.Objects = append(res.Objects, c.classes[name])
	}
	for _, o := range res.Objects {
		if o.Kind == "EC2NodeClass" {
			if err := c.finishClass(o); err != nil {
				errs = append(errs, err.Error())
			}
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return res, nil
}

type converter struct {
	opts    Options
	classes map[string]*Object
	// kubelet is, per class, the kubelet settings pools moved onto it; kubeletFrom
	// names the pool that set them, for the error when two pools disagree.
	kubelet     map[string]any
	kubeletFrom map[string]string
}

func apiKind(d map[string]any) string { return apiVersionOf(d) + "/" + kindOf(d) }
func apiVersionOf(d map[string]any) string {
	v, _ := d["apiVersion"].(string)
	return v
}
func kindOf(d map[string]any) string {
	v, _ := d["kind"].(string)
	return v
}
func nameOf(d map[string]any) string { return str(d["metadata"], "name") }

// dig walks nested maps; nil where a step is missing.
func dig(v any, path ...string) any {
	for _, p := range path {
		m, ok := v.(map[string]any)
		if !ok {
			return nil
		}
		v = m[p]
	}
	return v
}

func str(v any, key string) string {
	s, _ := dig(v, key).(string)
	return s
}

func mapOf(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// newObject starts a v1 object with the old one's name, labels and annotations.
func newObject(group, kind string, old map[string]any) *Object {
	meta := map[string]any{"name": nameOf(old)}
	for _, k := range []string{"labels", "annotations"} {
		if v := dig(old, "metadata", k); v != nil {
			meta[k] = v
		}
	}
	return &Object{Kind: kind, Name: nameOf(old), Body: map[string]any{"apiVersion": group + "/v1", "kind": kind, "metadata": meta, "spec": map[string]any{}}}
}

func (o *Object) spec() map[string]any { return o.Body["spec"].(map[string]any) }

func (o *Object) note(format string, args ...any) {
	o.Notes = append(o.Notes, fmt.Sprintf(format, args...))
}

// seconds writes a count of seconds as a Go duration string.
func seconds(v any) (string, bool) {
	switch n := v.(type) {
	case int64:
		return fmt.Sprintf("%ds", n), true
	case float64:
		return fmt.Sprintf("%ds", int64(n)), true
	case int:
		return fmt.Sprintf("%ds", n), true
	}
	return "", false
}
