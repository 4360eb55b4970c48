package provider

import (
	"context"
	"strings"

	"github.com/hashicorp/terraform-plugin-framework/attr"
	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/resource"
	"github.com/hashicorp/terraform-plugin-framework/types"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dovetail-sh/dovetail/templates"
)

// Read compares each object with what applying it again would make it (a server-side
// dry run), so kubectl edits and scales show as drift; a missing installation is gone.
func (r *controllerResource) Read(ctx context.Context, req resource.ReadRequest, resp *resource.ReadResponse) {
	var state controllerModel
	resp.Diagnostics.Append(req.State.Get(ctx, &state)...)
	cl := kubeClient(r.clients, &resp.Diagnostics)
	if resp.Diagnostics.HasError() {
		return
	}
	imported := state.ClusterName.IsNull()
	if imported {
		if !r.importFromCluster(ctx, cl, &state, &resp.Diagnostics) {
			resp.State.RemoveResource(ctx)
			return
		}
	}
	objs, digest, err := r.render(&state)
	if err != nil {
		resp.Diagnostics.AddError("Cannot render the controller's manifests", err.Error())
		return
	}
	var drift []string
	missing := 0
	for _, want := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(want.GroupVersionKind())
		err := cl.Get(ctx, client.ObjectKeyFromObject(want), live)
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			drift = append(drift, want.GetKind()+" "+objectName(want)+" is missing")
			missing++
			continue
		}
		if err != nil {
			resp.Diagnostics.AddError("Cannot read "+want.GetKind()+" "+objectName(want), err.Error())
			return
		}
		applied := want.DeepCopy()
		if err := cl.Patch(ctx, applied, client.Apply, client.ForceOwnership, client.FieldOwner(FieldManager), client.DryRunAll); err != nil {
			resp.Diagnostics.AddError("Cannot compare "+want.GetKind()+" "+objectName(want)+" with its manifest", err.Error())
			return
		}
		if !sameContent(live, applied) {
			drift = append(drift, want.GetKind()+" "+objectName(want)+" differs")
		}
	}
	if missing == len(objs) {
		resp.State.RemoveResource(ctx)
		return
	}
	if len(drift) > 0 {
		state.ManifestsSHA256 = types.StringValue("drifted: " + strings.Join(drift, "; "))
	} else if imported {
		state.ManifestsSHA256 = types.StringValue(digest)
	}
	resp.Diagnostics.Append(resp.State.Set(ctx, &state)...)
}

// sameContent compares objects without the fields the server maintains.
func sameContent(a, b *unstructured.Unstructured) bool {
	strip := func(u *unstructured.Unstructured) map[string]any {
		c := u.DeepCopy().Object
		unstructured.RemoveNestedField(c, "status")
		for _, f := range []string{"managedFields", "resourceVersion", "generation", "uid", "creationTimestamp"} {
			unstructured.RemoveNestedField(c, "metadata", f)
		}
		return c
	}
	return equality.Semantic.DeepEqual(strip(a), strip(b))
}

// importFromCluster fills the settings of an imported installation from its
// Deployment and ServiceAccount; false when there is no such Deployment.
func (r *controllerResource) importFromCluster(ctx context.Context, cl client.Client, m *controllerModel, diags *diag.Diagnostics) bool {
	deploy := &appsv1.Deployment{}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: m.Namespace.ValueString(), Name: m.Name.ValueString()}, deploy); err != nil {
		if !apierrors.IsNotFound(err) {
			diags.AddError("Cannot read the controller Deployment", err.Error())
		}
		return false
	}
	spec := deploy.Spec.Template.Spec
	if len(spec.Containers) == 0 {
		return false
	}
	c := spec.Containers[0]
	env := map[string]string{}
	for _, e := range c.Env {
		env[e.Name] = e.Value
	}
	str := func(k string) types.String {
		if v, ok := env[k]; ok && v != "" {
			return types.StringValue(v)
		}
		return types.StringNull()
	}
	m.ServiceAccount = types.StringValue(spec.ServiceAccountName)
	m.Image = types.StringValue(c.Image)
	m.Replicas = types.Int64Value(int64(ptrValue(deploy.Spec.Replicas)))
	m.CPU = types.StringValue(c.Resources.Requests.Cpu().String())
	m.Memory = types.StringValue(c.Resources.Requests.Memory().String())
	m.ClusterName = str("CLUSTER_NAME")
	m.ClusterEndpoint = str("CLUSTER_ENDPOINT")
	m.AWSRegion = str("AWS_REGION")
	m.InterruptionQueue = str("INTERRUPTION_QUEUE")
	m.IsolatedVPC = types.BoolValue(env["ISOLATED_VPC"] == "true")
	m.LogLevel = types.StringValue(env["LOG_LEVEL"])
	m.BatchIdleDuration = types.StringValue(env["BATCH_IDLE_DURATION"])
	m.BatchMaxDuration = types.StringValue(env["BATCH_MAX_DURATION"])
	m.FeatureGates = keyValueMap(env["FEATURE_GATES"], func(v string) attr.Value { return types.BoolValue(v == "true") }, types.BoolType)
	m.AWSEndpoints = keyValueMap(env["AWS_ENDPOINTS"], func(v string) attr.Value { return types.StringValue(v) }, types.StringType)
	// Node costs are rendered only when they differ from the controller's defaults.
	defaults := templates.DefaultSettings()
	orDefault := func(k string, def string) types.String {
		if v := env[k]; v != "" {
			return types.StringValue(v)
		}
		return types.StringValue(def)
	}
	m.RootVolumePricePerGiBMonth = orDefault("ROOT_VOLUME_PRICE_PER_GIB_MONTH", defaults.RootVolumePricePerGiBMonth)
	m.PublicIPv4PricePerHour = orDefault("PUBLIC_IPV4_PRICE_PER_HOUR", defaults.PublicIPv4PricePerHour)
	m.NodeOverheadPricePerHour = orDefault("NODE_OVERHEAD_PRICE_PER_HOUR", defaults.NodeOverheadPricePerHour)
	m.FewerNodesTolerance = orDefault("FEWER_NODES_TOLERANCE", defaults.FewerNodesTolerance)
	ns := &corev1.Namespace{}
	m.CreateNamespace = types.BoolValue(cl.Get(ctx, client.ObjectKey{Name: m.Namespace.ValueString()}, ns) == nil && ns.Labels["app.kubernetes.io/managed-by"] == "dovetail")
	sa := &corev1.ServiceAccount{}
	m.IRSARoleARN = types.StringNull()
	if err := cl.Get(ctx, client.ObjectKey{Namespace: m.Namespace.ValueString(), Name: spec.ServiceAccountName}, sa); err == nil {
		if arn := sa.Annotations["eks.amazonaws.com/role-arn"]; arn != "" {
			m.IRSARoleARN = types.StringValue(arn)
		}
	}
	m.WaitForRollout = types.BoolValue(true)
	m.KeepCRDsOnDestroy = types.BoolValue(false)
	m.RolloutTimeout = types.StringValue("5m")
	rollout := keyValueMap(deploy.Annotations[rolloutAnnotation], func(v string) attr.Value { return types.StringValue(v) }, types.StringType)
	if v, ok := rollout.Elements()["wait"].(types.String); ok {
		m.WaitForRollout = types.BoolValue(v.ValueString() != "false")
	}
	if v, ok := rollout.Elements()["timeout"].(types.String); ok && v.ValueString() != "" {
		m.RolloutTimeout = v
	}
	m.Timeouts = timeoutsFromAnnotation(rollout, opCreate, opUpdate, opDelete)
	return true
}

func keyValueMap(s string, value func(string) attr.Value, elem attr.Type) types.Map {
	if s == "" {
		return types.MapNull(elem)
	}
	out := map[string]attr.Value{}
	for _, pair := range strings.Split(s, ",") {
		if k, v, ok := strings.Cut(pair, "="); ok {
			out[k] = value(v)
		}
	}
	return types.MapValueMust(elem, out)
}
