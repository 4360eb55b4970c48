package migrate

import (
	"fmt"
	"sort"
	"strings"
)

// aliases are the v1 amiSelectorTerms aliases of the old amiFamily values.
var aliases = map[string]string{"AL2": "al2@latest", "AL2023": "al2023@latest", "Bottlerocket": "bottlerocket@latest",
	"Windows2019": "windows2019@latest", "Windows2022": "windows2022@latest"}

// carried are the template fields whose v1 form is the same.
var carried = []string{"userData", "tags", "metadataOptions", "blockDeviceMappings", "detailedMonitoring", "context", "associatePublicIPAddress", "instanceStorePolicy"}

// awsNodeTemplate converts a karpenter.k8s.aws/v1alpha1 AWSNodeTemplate.
func (c *converter) awsNodeTemplate(d map[string]any) error {
	return c.v1alpha1Class(nameOf(d), d, mapOf(d["spec"]))
}

// inlineProvider converts a Provisioner's provider block to a class of its name.
func (c *converter) inlineProvider(name string, provider map[string]any) error {
	return c.v1alpha1Class(name, map[string]any{"metadata": map[string]any{"name": name}}, provider)
}

func (c *converter) v1alpha1Class(name string, d, old map[string]any) error {
	if old == nil {
		old = map[string]any{}
	}
	o := newObject(groupAWS, "EC2NodeClass", d)
	s := o.spec()
	var err error
	if s["subnetSelectorTerms"], err = selectorTerms(o, "subnetSelector", old["subnetSelector"], false); err != nil {
		return err
	}
	if s["securityGroupSelectorTerms"], err = selectorTerms(o, "securityGroupSelector", old["securityGroupSelector"], false); err != nil {
		return err
	}
	family, _ := old["amiFamily"].(string)
	if family == "" {
		family = "AL2"
		o.note("no amiFamily: v1alpha1 defaulted to AL2, kept as alias al2@latest")
	}
	if sel := old["amiSelector"]; sel != nil {
		if s["amiSelectorTerms"], err = selectorTerms(o, "amiSelector", sel, true); err != nil {
			return err
		}
		s["amiFamily"] = family
		o.note("amiSelector became amiSelectorTerms; amiFamily %s stays to pick the user data format", family)
	} else if alias, ok := aliases[family]; ok {
		s["amiSelectorTerms"] = []any{map[string]any{"alias": alias}}
		o.note("amiFamily %s became amiSelectorTerms alias %s (the latest image; pin a version such as %s to hold it)", family, alias, strings.Replace(alias, "latest", "v20240807", 1))
	} else {
		return fmt.Errorf("%s: amiFamily %s needs amiSelector; add the images to select", name, family)
	}
	if p, ok := old["instanceProfile"].(string); ok && p != "" {
		s["instanceProfile"] = p
	}
	for _, k := range carried {
		if v, ok := old[k]; ok {
			s[k] = v
		}
	}
	for _, k := range append([]string{"subnetSelector", "securityGroupSelector", "amiFamily", "amiSelector", "instanceProfile"}, carried...) {
		delete(old, k)
	}
	keys := make([]string, 0, len(old))
	for k := range old {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		o.note("%s has no v1 equivalent and was dropped", k)
	}
	c.classes[name] = o
	return nil
}

// ec2NodeClassV1beta1 converts a karpenter.k8s.aws/v1beta1 EC2NodeClass.
func (c *converter) ec2NodeClassV1beta1(d map[string]any) error {
	o := newObject(groupAWS, "EC2NodeClass", d)
	for k, v := range mapOf(d["spec"]) {
		o.spec()[k] = v
	}
	s := o.spec()
	if _, ok := s["amiSelectorTerms"]; !ok {
		family, _ := s["amiFamily"].(string)
		alias, ok := aliases[family]
		if !ok {
			return fmt.Errorf("EC2NodeClass %s: amiFamily %q without amiSelectorTerms has no v1 alias; add amiSelectorTerms", o.Name, family)
		}
		s["amiSelectorTerms"] = []any{map[string]any{"alias": alias}}
		delete(s, "amiFamily")
		o.note("amiFamily %s without amiSelectorTerms became alias %s", family, alias)
	}
	c.classes[o.Name] = o
	return nil
}

// finishClass adds the kubelet settings pools moved here and settles the nodes'
// IAM identity, which v1 requires.
func (c *converter) finishClass(o *Object) error {
	s := o.spec()
	if k, ok := c.kubelet[o.Name]; ok {
		s["kubelet"] = k
	}
	_, hasProfile := s["instanceProfile"]
	_, hasRole := s["role"]
	switch {
	case c.opts.Role != "":
		delete(s, "instanceProfile")
		s["role"] = c.opts.Role
		if hasProfile {
			o.note("--role %s replaces the instance profile: Dovetail manages the profile for the role", c.opts.Role)
		}
	case c.opts.InstanceProfile != "":
		delete(s, "role")
		s["instanceProfile"] = c.opts.InstanceProfile
	case hasProfile || hasRole:
	default:
		return fmt.Errorf("EC2NodeClass %s has no role or instanceProfile (the old default came from the controller's settings); pass --role NAME (the nodes' IAM role) or --instance-profile NAME", o.Name)
	}
	return nil
}

// selectorTerms converts an old selector map. The special keys name resources by
// id (aws-ids, aws::ids), and for images by name and owner; every other key is a
// tag. ids become one term each, as v1 requires an id alone in its term.
func selectorTerms(o *Object, field string, v any, images bool) ([]any, error) {
	sel := mapOf(v)
	if len(sel) == 0 {
		return nil, fmt.Errorf("%s %s: %s is empty; v1 needs at least one selector term", o.Kind, o.Name, field)
	}
	var terms []any
	tags := map[string]any{}
	term := map[string]any{}
	keys := make([]string, 0, len(sel))
	for k := range sel {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		val := fmt.Sprint(sel[k])
		switch k {
		case "aws-ids", "aws::ids":
			for _, id := range strings.Split(val, ",") {
				if id = strings.TrimSpace(id); id != "" {
					terms = append(terms, map[string]any{"id": id})
				}
			}
		case "aws::name":
			if !images {
				tags["Name"] = val
				continue
			}
			term["name"] = val
		case "aws::owners":
			if images {
				for _, owner := range strings.Split(val, ",") {
					t := map[string]any{"owner": strings.TrimSpace(owner)}
					for k2, v2 := range term {
						t[k2] = v2
					}
					terms = append(terms, t)
				}
				term = nil
			}
		default:
			tags[k] = val
		}
	}
	if len(tags) > 0 {
		if term == nil {
			for _, t := range terms {
				t.(map[string]any)["tags"] = tags
			}
		} else {
			term["tags"] = tags
		}
	}
	if len(term) > 0 {
		terms = append(terms, term)
	}
	var pairs []string
	for _, k := range keys {
		pairs = append(pairs, fmt.Sprintf("%s=%v", k, sel[k]))
	}
	o.note("%s {%s} became %d selector term(s)", field, strings.Join(pairs, ", "), len(terms))
	return terms, nil
}
