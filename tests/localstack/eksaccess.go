package localstack

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"
)

// EKSAccess serves the EKS APIs moto 5.2 lacks, access entries and Pod Identity
// associations, with EKS's REST wire format and errors, and passes every other request
// to moto, which holds the clusters. Point the EKS endpoint (AWS_ENDPOINT_URL_EKS, or a
// provider's endpoints.eks) at URL.
type EKSAccess struct {
	URL  string
	moto string

	mu           sync.Mutex
	entries      map[string]map[string]*accessEntry // cluster → principal ARN
	associations map[string]map[string]*podIdentity // cluster → association ID
	authMode     map[string]string                  // cluster → authentication mode
	server       *httptest.Server
}

type accessEntry struct {
	ClusterName      string            `json:"clusterName"`
	PrincipalArn     string            `json:"principalArn"`
	KubernetesGroups []string          `json:"kubernetesGroups"`
	AccessEntryArn   string            `json:"accessEntryArn"`
	CreatedAt        float64           `json:"createdAt"`
	ModifiedAt       float64           `json:"modifiedAt"`
	Tags             map[string]string `json:"tags"`
	Username         string            `json:"username"`
	Type             string            `json:"type"`
}

type podIdentity struct {
	ClusterName    string            `json:"clusterName"`
	Namespace      string            `json:"namespace"`
	ServiceAccount string            `json:"serviceAccount"`
	RoleArn        string            `json:"roleArn"`
	AssociationArn string            `json:"associationArn"`
	AssociationID  string            `json:"associationId"`
	Tags           map[string]string `json:"tags"`
	CreatedAt      float64           `json:"createdAt"`
	ModifiedAt     float64           `json:"modifiedAt"`
}

const account = "123456789012"

// StartEKSAccess serves in front of moto until Stop.
func StartEKSAccess(moto *Moto) (*EKSAccess, error) {
	target, err := url.Parse(moto.Endpoint)
	if err != nil {
		return nil, err
	}
	e := &EKSAccess{moto: moto.Endpoint, entries: map[string]map[string]*accessEntry{}, associations: map[string]map[string]*podIdentity{}, authMode: map[string]string{}}
	proxy := httputil.NewSingleHostReverseProxy(target)
	e.server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !e.serve(w, r) {
			proxy.ServeHTTP(w, r)
		}
	}))
	e.URL = e.server.URL
	return e, nil
}

// Stop ends the server.
func (e *EKSAccess) Stop() { e.server.Close() }

// SetAuthenticationMode sets a cluster's access config, as UpdateClusterConfig would:
// access entries need API or API_AND_CONFIG_MAP (the default here).
func (e *EKSAccess) SetAuthenticationMode(cluster, mode string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.authMode[cluster] = mode
}

// AccessEntries are a cluster's entries by principal ARN, with their types.
func (e *EKSAccess) AccessEntries(cluster string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for arn, entry := range e.entries[cluster] {
		out[arn] = entry.Type
	}
	return out
}

// PodIdentityAssociations are a cluster's associations as namespace/serviceAccount → role ARN.
func (e *EKSAccess) PodIdentityAssociations(cluster string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := map[string]string{}
	for _, a := range e.associations[cluster] {
		out[a.Namespace+"/"+a.ServiceAccount] = a.RoleArn
	}
	return out
}

func eksError(w http.ResponseWriter, status int, kind, format string, args ...any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Amzn-ErrorType", kind)
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"message": fmt.Sprintf(format, args...)})
}

func eksReply(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(v)
}

// serve answers the requests it knows and reports whether it did.
func (e *EKSAccess) serve(w http.ResponseWriter, r *http.Request) bool {
	parts := strings.Split(strings.Trim(r.URL.EscapedPath(), "/"), "/")
	if len(parts) == 2 && parts[0] == "tags" {
		arn, _ := url.PathUnescape(parts[1])
		return e.serveTags(w, r, arn)
	}
	if len(parts) < 3 || parts[0] != "clusters" || (parts[2] != "access-entries" && parts[2] != "pod-identity-associations") {
		return false
	}
	cluster, _ := url.PathUnescape(parts[1])
	var id string
	if len(parts) > 3 {
		id, _ = url.PathUnescape(parts[3])
	}
	if !e.clusterExists(r, cluster) {
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "No cluster found for name: %s.", cluster)
		return true
	}
	var body map[string]any
	if r.Method == http.MethodPost {
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			eksError(w, http.StatusBadRequest, "InvalidParameterException", "%v", err)
			return true
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if parts[2] == "access-entries" {
		e.serveAccessEntries(w, r, cluster, id, body)
	} else {
		e.servePodIdentity(w, r, cluster, id, body)
	}
	return true
}

// clusterExists asks moto, with the request's credentials: moto's region is the
// one their signature names.
func (e *EKSAccess) clusterExists(r *http.Request, name string) bool {
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, e.moto+"/clusters/"+url.PathEscape(name), nil)
	if err != nil {
		return false
	}
	req.Header.Set("Authorization", r.Header.Get("Authorization"))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func stringsOf(v any) []string {
	var out []string
	if list, ok := v.([]any); ok {
		for _, x := range list {
			if s, ok := x.(string); ok {
				out = append(out, s)
			}
		}
	}
	return out
}

func tagsOf(v any) map[string]string {
	out := map[string]string{}
	if m, ok := v.(map[string]any); ok {
		for k, x := range m {
			if s, ok := x.(string); ok {
				out[k] = s
			}
		}
	}
	return out
}

func now() float64 { return float64(time.Now().UnixMilli()) / 1000 }

func (e *EKSAccess) serveAccessEntries(w http.ResponseWriter, r *http.Request, cluster, principal string, body map[string]any) {
	if mode := e.authMode[cluster]; mode == "CONFIG_MAP" {
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "The cluster's authentication mode must be set to one of [API, API_AND_CONFIG_MAP] to perform this operation.")
		return
	}
	entries := e.entries[cluster]
	if entries == nil {
		entries = map[string]*accessEntry{}
		e.entries[cluster] = entries
	}
	switch {
	case r.Method == http.MethodPost && principal == "":
		arn, _ := body["principalArn"].(string)
		kind, _ := body["type"].(string)
		if kind == "" {
			kind = "STANDARD"
		}
		if !slices.Contains([]string{"STANDARD", "EC2_LINUX", "EC2_WINDOWS", "FARGATE_LINUX", "EC2", "HYBRID_LINUX", "HYPERPOD_LINUX"}, kind) {
			eksError(w, http.StatusBadRequest, "InvalidParameterException", "The type %s is not valid.", kind)
			return
		}
		if !strings.HasPrefix(arn, "arn:aws:iam::") {
			eksError(w, http.StatusBadRequest, "InvalidParameterException", "The principalArn parameter format is not valid")
			return
		}
		if _, ok := entries[arn]; ok {
			eksError(w, http.StatusConflict, "ResourceInUseException", "The specified access entry resource is already in use on this cluster.")
			return
		}
		groups := stringsOf(body["kubernetesGroups"])
		if kind != "STANDARD" && len(groups) > 0 {
			eksError(w, http.StatusBadRequest, "InvalidParameterException", "Kubernetes groups cannot be specified for access entries of type %s.", kind)
			return
		}
		role := arn[strings.LastIndex(arn, "/")+1:]
		username := "arn:aws:sts::" + account + ":assumed-role/" + role + "/{{SessionName}}"
		if kind == "EC2_LINUX" || kind == "EC2_WINDOWS" {
			username = "system:node:{{EC2PrivateDNSName}}"
		}
		t := now()
		entry := &accessEntry{ClusterName: cluster, PrincipalArn: arn, KubernetesGroups: groups, Type: kind, Username: username, Tags: tagsOf(body["tags"]),
			AccessEntryArn: fmt.Sprintf("arn:aws:eks:us-west-2:%s:access-entry/%s/role/%s/%s/%s", account, cluster, account, role, randomID(8)), CreatedAt: t, ModifiedAt: t}
		entries[arn] = entry
		eksReply(w, map[string]any{"accessEntry": entry})
	case principal == "":
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "%s %s is not served here", r.Method, r.URL.Path)
	case entries[principal] == nil:
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "The specified principalArn could not be found. You can view your available access entries with 'list-access-entries'.")
	case r.Method == http.MethodGet:
		eksReply(w, map[string]any{"accessEntry": entries[principal]})
	case r.Method == http.MethodDelete:
		delete(entries, principal)
		eksReply(w, map[string]any{})
	default:
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "%s %s is not served here", r.Method, r.URL.Path)
	}
}

func randomID(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (e *EKSAccess) servePodIdentity(w http.ResponseWriter, r *http.Request, cluster, id string, body map[string]any) {
	associations := e.associations[cluster]
	if associations == nil {
		associations = map[string]*podIdentity{}
		e.associations[cluster] = associations
	}
	switch {
	case r.Method == http.MethodPost && id == "":
		ns, _ := body["namespace"].(string)
		sa, _ := body["serviceAccount"].(string)
		role, _ := body["roleArn"].(string)
		if ns == "" || sa == "" || !strings.HasPrefix(role, "arn:aws:iam::") {
			eksError(w, http.StatusBadRequest, "InvalidParameterException", "namespace, serviceAccount and roleArn are required")
			return
		}
		for _, a := range associations {
			if a.Namespace == ns && a.ServiceAccount == sa {
				eksError(w, http.StatusConflict, "ResourceInUseException", "Association already exists: %s", a.AssociationID)
				return
			}
		}
		aid := "a-" + randomID(8)
		t := now()
		a := &podIdentity{ClusterName: cluster, Namespace: ns, ServiceAccount: sa, RoleArn: role, AssociationID: aid, Tags: tagsOf(body["tags"]), CreatedAt: t, ModifiedAt: t,
			AssociationArn: fmt.Sprintf("arn:aws:eks:us-west-2:%s:podidentityassociation/%s/%s", account, cluster, aid)}
		associations[aid] = a
		eksReply(w, map[string]any{"association": a})
	case r.Method == http.MethodGet && id == "":
		q := r.URL.Query()
		var list []map[string]string
		for _, a := range associations {
			if (q.Get("namespace") == "" || q.Get("namespace") == a.Namespace) && (q.Get("serviceAccount") == "" || q.Get("serviceAccount") == a.ServiceAccount) {
				list = append(list, map[string]string{"clusterName": cluster, "namespace": a.Namespace, "serviceAccount": a.ServiceAccount, "associationArn": a.AssociationArn, "associationId": a.AssociationID})
			}
		}
		eksReply(w, map[string]any{"associations": list})
	case id == "":
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "%s %s is not served here", r.Method, r.URL.Path)
	case associations[id] == nil:
		eksError(w, http.StatusNotFound, "ResourceNotFoundException", "Association %s not found.", id)
	case r.Method == http.MethodGet:
		eksReply(w, map[string]any{"association": associations[id]})
	case r.Method == http.MethodPost:
		a := associations[id]
		if role, _ := body["roleArn"].(string); role != "" {
			a.RoleArn = role
		}
		a.ModifiedAt = now()
		eksReply(w, map[string]any{"association": a})
	case r.Method == http.MethodDelete:
		a := associations[id]
		delete(associations, id)
		eksReply(w, map[string]any{"association": a})
	default:
		eksError(w, http.StatusBadRequest, "InvalidRequestException", "%s %s is not served here", r.Method, r.URL.Path)
	}
}

// serveTags serves TagResource, UntagResource and ListTagsForResource for the
// resources held here; other ARNs go to moto.
func (e *EKSAccess) serveTags(w http.ResponseWriter, r *http.Request, arn string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	var tags map[string]string
	for _, entries := range e.entries {
		for _, entry := range entries {
			if entry.AccessEntryArn == arn {
				tags = entry.Tags
			}
		}
	}
	for _, associations := range e.associations {
		for _, a := range associations {
			if a.AssociationArn == arn {
				tags = a.Tags
			}
		}
	}
	if tags == nil {
		return false
	}
	switch r.Method {
	case http.MethodGet:
		eksReply(w, map[string]any{"tags": maps.Clone(tags)})
	case http.MethodPost:
		var body struct {
			Tags map[string]string `json:"tags"`
		}
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			eksError(w, http.StatusBadRequest, "BadRequestException", "%v", err)
			return true
		}
		maps.Copy(tags, body.Tags)
		eksReply(w, map[string]any{})
	case http.MethodDelete:
		for _, k := range r.URL.Query()["tagKeys"] {
			delete(tags, k)
		}
		eksReply(w, map[string]any{})
	default:
		return false
	}
	return true
}
