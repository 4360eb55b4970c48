package provider

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/terraform-plugin-framework/diag"
	"github.com/hashicorp/terraform-plugin-framework/provider/schema"
	"github.com/hashicorp/terraform-plugin-framework/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/client-go/util/homedir"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// kubernetesModel mirrors the hashicorp/kubernetes provider's settings.
type kubernetesModel struct {
	Host                 types.String `tfsdk:"host"`
	Token                types.String `tfsdk:"token"`
	ClusterCACertificate types.String `tfsdk:"cluster_ca_certificate"`
	ClientCertificate    types.String `tfsdk:"client_certificate"`
	ClientKey            types.String `tfsdk:"client_key"`
	Insecure             types.Bool   `tfsdk:"insecure"`
	ConfigPath           types.String `tfsdk:"config_path"`
	ConfigContext        types.String `tfsdk:"config_context"`
	Exec                 *execModel   `tfsdk:"exec"`
}

type execModel struct {
	APIVersion types.String            `tfsdk:"api_version"`
	Command    types.String            `tfsdk:"command"`
	Args       []types.String          `tfsdk:"args"`
	Env        map[string]types.String `tfsdk:"env"`
}

func kubernetesBlock() schema.Block {
	return schema.SingleNestedBlock{
		Description: "How to reach the cluster, as in the hashicorp/kubernetes provider: a kubeconfig (config_path, config_context, or KUBE_CONFIG_PATH), or host with a token, client certificate or an exec plugin such as `aws eks get-token`. Settings given here override the kubeconfig's.",
		Attributes: map[string]schema.Attribute{
			"host":                   schema.StringAttribute{Optional: true, Description: "API server URL, such as the EKS cluster endpoint."},
			"token":                  schema.StringAttribute{Optional: true, Sensitive: true, Description: "Bearer token."},
			"cluster_ca_certificate": schema.StringAttribute{Optional: true, Description: "PEM-encoded CA bundle of the API server (base64-decode the EKS certificate_authority data)."},
			"client_certificate":     schema.StringAttribute{Optional: true, Description: "PEM-encoded client certificate."},
			"client_key":             schema.StringAttribute{Optional: true, Sensitive: true, Description: "PEM-encoded client key."},
			"insecure":               schema.BoolAttribute{Optional: true, Description: "Skip verifying the API server's certificate."},
			"config_path":            schema.StringAttribute{Optional: true, Description: "A kubeconfig file; defaults to KUBE_CONFIG_PATH."},
			"config_context":         schema.StringAttribute{Optional: true, Description: "Context of the kubeconfig to use instead of its current one."},
		},
		Blocks: map[string]schema.Block{
			"exec": schema.SingleNestedBlock{
				Description: "A credential plugin run for each token, such as `aws eks get-token --cluster-name NAME`.",
				Attributes: map[string]schema.Attribute{
					"api_version": schema.StringAttribute{Optional: true, Description: "client.authentication.k8s.io/v1beta1 unless set."},
					"command":     schema.StringAttribute{Optional: true, Description: "The plugin, such as aws."},
					"args":        schema.ListAttribute{Optional: true, ElementType: types.StringType, Description: "Arguments of the credential plugin, e.g. [\"eks\", \"get-token\", \"--cluster-name\", \"demo\"]."},
					"env":         schema.MapAttribute{Optional: true, ElementType: types.StringType, Description: "Environment variables the credential plugin runs with."},
				},
			},
		},
	}
}

// KubeClients reaches the cluster. The client is made on first use: a provider block
// whose host comes from a cluster created in the same apply is unknown at plan time,
// and resources do not need the cluster to plan a create.
type KubeClients struct {
	build func() (*rest.Config, error)

	once   sync.Once
	config *rest.Config
	client client.Client
	err    error
}

// Config returns the rest configuration the client was made with.
func (k *KubeClients) Config() (*rest.Config, error) {
	k.init()
	return k.config, k.err
}

// Client returns the controller-runtime client (unstructured objects, server-side apply).
func (k *KubeClients) Client() (client.Client, error) {
	k.init()
	return k.client, k.err
}

func (k *KubeClients) init() {
	k.once.Do(func() {
		cfg, err := k.build()
		if err != nil {
			k.err = err
			return
		}
		cfg.UserAgent = "terraform-provider-dovetail"
		if k.err = checkCredentials(cfg); k.err != nil {
			return
		}
		k.config = cfg
		if k.client, err = client.New(cfg, client.Options{}); err != nil {
			k.err = fmt.Errorf("connecting to the cluster at %s, %w", cfg.Host, err)
		}
	})
}

// checkCredentials asks the server its version first, so that wrong or expired
// credentials fail with one message that says where they came from instead of as
// a discovery error deep in the first request.
func checkCredentials(cfg *rest.Config) error {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("building the kubernetes client configuration, %w", err)
	}
	_, err = dc.ServerVersion()
	switch {
	case err == nil:
		return nil
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the API server at %s rejected the provider's credentials (401 Unauthorized): check the kubernetes block's token, client_certificate/client_key or exec plugin (an `aws eks get-token` token lasts 15 minutes), or the kubeconfig's user", cfg.Host)
	case apierrors.IsForbidden(err):
		return fmt.Errorf("the API server at %s refused the provider's identity (403 Forbidden): grant it access to the cluster (an EKS access entry or aws-auth mapping), %w", cfg.Host, err)
	default:
		return fmt.Errorf("cannot reach the API server at %s (kubernetes block): %w", cfg.Host, err)
	}
}

func newKubeClients(m *kubernetesModel) *KubeClients {
	unknown := m.Host.IsUnknown() || m.Token.IsUnknown() || m.ClusterCACertificate.IsUnknown() || m.ClientCertificate.IsUnknown() ||
		m.ClientKey.IsUnknown() || m.ConfigPath.IsUnknown() || m.ConfigContext.IsUnknown()
	if m.Exec != nil {
		unknown = unknown || m.Exec.Command.IsUnknown() || anyUnknown(m.Exec.Args)
	}
	if unknown {
		return &KubeClients{build: func() (*rest.Config, error) {
			return nil, fmt.Errorf("the provider's kubernetes block depends on values not known until apply (such as a cluster created in the same run); the cluster is reached once they are")
		}}
	}
	return &KubeClients{build: func() (*rest.Config, error) { return restConfig(m) }}
}

func anyUnknown(values []types.String) bool {
	for _, v := range values {
		if v.IsUnknown() {
			return true
		}
	}
	return false
}

// restConfig layers the block's settings over the kubeconfig, if any.
func restConfig(m *kubernetesModel) (*rest.Config, error) {
	rules := &clientcmd.ClientConfigLoadingRules{}
	configPath := m.ConfigPath.ValueString()
	if configPath == "" {
		configPath = os.Getenv("KUBE_CONFIG_PATH")
	}
	if underHome, ok := strings.CutPrefix(configPath, "~/"); ok {
		configPath = filepath.Join(homedir.HomeDir(), underHome)
	}
	if configPath != "" {
		if _, err := os.Stat(configPath); err != nil {
			return nil, fmt.Errorf("reading kubernetes.config_path, %w", err)
		}
		rules.ExplicitPath = configPath
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: m.ConfigContext.ValueString()}
	if h := m.Host.ValueString(); h != "" {
		overrides.ClusterInfo.Server = h
	}
	if ca := m.ClusterCACertificate.ValueString(); ca != "" {
		overrides.ClusterInfo.CertificateAuthorityData = []byte(ca)
	}
	if m.Insecure.ValueBool() {
		overrides.ClusterInfo.InsecureSkipTLSVerify = true
	}
	if tok := m.Token.ValueString(); tok != "" {
		overrides.AuthInfo.Token = tok
	}
	if c := m.ClientCertificate.ValueString(); c != "" {
		overrides.AuthInfo.ClientCertificateData = []byte(c)
	}
	if k := m.ClientKey.ValueString(); k != "" {
		overrides.AuthInfo.ClientKeyData = []byte(k)
	}
	if e := m.Exec; e != nil && e.Command.ValueString() != "" {
		exec := &clientcmdapi.ExecConfig{APIVersion: e.APIVersion.ValueString(), Command: e.Command.ValueString(),
			Args: stringValues(e.Args), InteractiveMode: clientcmdapi.NeverExecInteractiveMode}
		if exec.APIVersion == "" {
			exec.APIVersion = "client.authentication.k8s.io/v1beta1"
		}
		for k, v := range e.Env {
			exec.Env = append(exec.Env, clientcmdapi.ExecEnvVar{Name: k, Value: v.ValueString()})
		}
		overrides.AuthInfo.Exec = exec
	}
	if configPath == "" && overrides.ClusterInfo.Server == "" {
		return nil, fmt.Errorf("the kubernetes block names no cluster: set host (with token, client_certificate/client_key or exec) or config_path")
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("building the kubernetes client configuration, %w", err)
	}
	return cfg, nil
}

// requireKubernetes fails a plan that needs the cluster when the provider has no
// kubernetes block.
func requireKubernetes(c *Clients, resourceType string, diags *diag.Diagnostics) {
	if c != nil && c.Kubernetes == nil {
		diags.AddError("The dovetail provider has no kubernetes block",
			resourceType+" is stored in the cluster: add kubernetes { config_path = \"~/.kube/config\" } (or host, cluster_ca_certificate and exec { command = \"aws\" ... }) to the provider \"dovetail\" block.")
	}
}

// kubeClient is the client of a configured provider, as a diagnostic when it cannot be made.
func kubeClient(c *Clients, diags *diag.Diagnostics) client.Client {
	if c == nil || c.Kubernetes == nil {
		diags.AddError("The dovetail provider has no kubernetes block", "Add kubernetes { ... } to the provider \"dovetail\" block.")
		return nil
	}
	cl, err := c.Kubernetes.Client()
	if err != nil {
		diags.AddError("Cannot reach the cluster", err.Error())
		return nil
	}
	return cl
}
