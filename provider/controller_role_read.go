package provider

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/types"
)

// policyDocument is an IAM policy as read back: statements by Sid, with resources
// and conditions as IAM returns them (a string or a list).
type policyDocument struct {
	Statement []struct {
		Sid       string
		Resource  any
		Principal map[string]any
		Condition map[string]map[string]any
	}
}

func parsePolicy(raw string) (*policyDocument, bool) {
	doc, err := url.QueryUnescape(raw)
	if err != nil {
		doc = raw
	}
	var p policyDocument
	if err := json.Unmarshal([]byte(doc), &p); err != nil {
		return nil, false
	}
	return &p, true
}

func strs(v any) []string {
	switch t := v.(type) {
	case string:
		return []string{t}
	case []any:
		var out []string
		for _, e := range t {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// readTrust sets what the role's trust policy says: the OIDC provider, namespace
// and service account of an IRSA trust. A Pod Identity trust names no service
// account (the association does): the configured ones are kept, and an import,
// which has none, takes the defaults.
func readTrust(raw string, m *controllerRoleModel) {
	if m.Namespace.IsNull() {
		m.Namespace = types.StringValue("dovetail")
	}
	if m.ServiceAccount.IsNull() {
		m.ServiceAccount = types.StringValue("dovetail")
	}
	p, ok := parsePolicy(raw)
	if !ok {
		return
	}
	m.OIDCProviderARN = types.StringNull()
	for _, st := range p.Statement {
		federated := strs(st.Principal["Federated"])
		if len(federated) != 1 {
			continue
		}
		m.OIDCProviderARN = types.StringValue(federated[0])
		for key, v := range st.Condition["StringEquals"] {
			sub, _ := v.(string)
			if rest, ok := strings.CutPrefix(sub, "system:serviceaccount:"); ok && strings.HasSuffix(key, ":sub") {
				if ns, sa, ok := strings.Cut(rest, ":"); ok {
					m.Namespace, m.ServiceAccount = types.StringValue(ns), types.StringValue(sa)
				}
			}
		}
	}
}

// readPolicyInputs recovers, for an imported role, the inputs its inline policy was
// rendered from (ControllerPolicy), so the configuration that made it plans no
// change. Inputs the state already has (from the configuration) are kept: a policy
// edited outside Terraform is drift of policy_json, not of them.
func readPolicyInputs(raw string, m *controllerRoleModel) {
	p, ok := parsePolicy(raw)
	if !ok {
		return
	}
	set := func(dst *types.String, v string) {
		if dst.IsNull() && v != "" {
			*dst = types.StringValue(v)
		}
	}
	var ssm []string
	for _, st := range p.Statement {
		resources := strs(st.Resource)
		switch st.Sid {
		case "AllowAPIServerEndpointDiscovery":
			if len(resources) == 1 {
				// arn:<partition>:eks:<region>:<account>:cluster/<name>
				if parts := strings.SplitN(resources[0], ":", 6); len(parts) == 6 {
					set(&m.Region, parts[3])
					if parts[4] != "*" {
						set(&m.AccountID, parts[4])
					}
					set(&m.ClusterName, strings.TrimPrefix(parts[5], "cluster/"))
				}
			}
		case "AllowPassingInstanceRole":
			if len(resources) == 1 {
				set(&m.NodeRoleARN, resources[0])
			}
		case "AllowInterruptionQueueActions":
			if len(resources) == 1 {
				set(&m.InterruptionQueueARN, resources[0])
			}
		case "AllowInterruptionQueueDecryption":
			// The key as rendered: by the alias it carries, else by its ARN. A key
			// configured by id or alias ARN renders the same policy and shows once
			// as an in-place change after an import.
			if aliases := strs(st.Condition["ForAnyValue:StringEquals"]["kms:ResourceAliases"]); len(aliases) == 1 {
				set(&m.InterruptionQueueKMS, aliases[0])
			} else if len(resources) == 1 {
				set(&m.InterruptionQueueKMS, resources[0])
			}
		case "AllowSSMReadActions":
			if len(resources) > 1 {
				ssm = resources[1:]
			}
		}
	}
	if m.AMISSMParameterARNs.IsNull() && len(ssm) > 0 {
		m.AMISSMParameterARNs, _ = types.ListValueFrom(context.Background(), types.StringType, ssm)
	}
}
