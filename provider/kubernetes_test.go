package provider_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/hashicorp/terraform-plugin-testing/helper/resource"
	"github.com/hashicorp/terraform-plugin-testing/terraform"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/dovetail-sh/dovetail/controller/apis/aws/v1"
	"github.com/dovetail-sh/dovetail/tests/testenv"
)

// Each way of reaching a cluster without a kubeconfig, as an EKS user writes it:
// host + CA with a client certificate, a bearer token, or an exec plugin that prints
// an ExecCredential (as `aws eks get-token` does). The token belongs to a
// ServiceAccount bound to cluster-admin, issued by the API server's TokenRequest.
func TestAccKubernetesBlockCredentials(t *testing.T) {
	acceptance(t)
	api := testenv.StartAPIServer(t)
	token := serviceAccountToken(t, api)

	plugin := filepath.Join(t.TempDir(), "get-token")
	script := `#!/bin/sh
[ "$1" = "eks" ] && [ "$2" = "get-token" ] || { echo "unexpected arguments: $*" >&2; exit 1; }
printf '{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"%s"}}' "$TOKEN"
`
	if err := os.WriteFile(plugin, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}

	connection := fmt.Sprintf("host = %q\n    cluster_ca_certificate = %q\n", api.Config.Host, string(api.Config.CAData))
	cases := map[string]string{
		"client-certificate": connection + fmt.Sprintf("    client_certificate = %q\n    client_key = %q\n",
			string(api.Config.CertData), string(api.Config.KeyData)),
		"token": connection + fmt.Sprintf("    token = %q\n", token),
		"exec": connection + fmt.Sprintf(`    exec {
      command = %q
      args    = ["eks", "get-token", "--cluster-name", "demo"]
      env     = { TOKEN = %q }
    }
`, plugin, token),
	}
	for name, block := range cases {
		t.Run(name, func(t *testing.T) {
			className := "creds-" + name
			config := "provider \"dovetail\" {\n  kubernetes {\n    " + block + "  }\n}\n" + nodeClassNamed(className)
			resource.Test(t, resource.TestCase{
				ProtoV6ProviderFactories: factories,
				CheckDestroy: func(*terraform.State) error {
					err := api.Client.Get(context.Background(), client.ObjectKey{Name: className}, &awsv1.EC2NodeClass{})
					if !apierrors.IsNotFound(err) {
						return fmt.Errorf("EC2NodeClass %s still exists after destroy (get: %v)", className, err)
					}
					return nil
				},
				Steps: []resource.TestStep{{
					Config: config,
					Check: func(*terraform.State) error {
						return api.Client.Get(context.Background(), client.ObjectKey{Name: className}, &awsv1.EC2NodeClass{})
					},
				}},
			})
		})
	}

	t.Run("rejected-token", func(t *testing.T) {
		config := "provider \"dovetail\" {\n  kubernetes {\n    " + connection + "    token = \"not-a-token\"\n  }\n}\n" + nodeClassNamed("rejected")
		resource.Test(t, resource.TestCase{
			ProtoV6ProviderFactories: factories,
			Steps:                    []resource.TestStep{{Config: config, ExpectError: regexp.MustCompile(`rejected the provider's\s+credentials\s+\(401\s+Unauthorized\)`)}},
		})
	})
}

func nodeClassNamed(name string) string {
	return fmt.Sprintf(`
resource "dovetail_ec2_node_class" "c" {
  name = %q
  spec = {
    role                          = "KarpenterNodeRole-demo"
    ami_selector_terms            = [{ alias = "al2023@latest" }]
    subnet_selector_terms         = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
    security_group_selector_terms = [{ tags = { "karpenter.sh/discovery" = "demo" } }]
  }
}
`, name)
}

// serviceAccountToken is a bearer token for a cluster-admin ServiceAccount.
func serviceAccountToken(t *testing.T, api *testenv.APIServer) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "terraform", Namespace: "default"}}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "terraform-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}},
	}
	for _, obj := range []client.Object{sa, binding} {
		if err := api.Client.Create(ctx, obj); err != nil {
			t.Fatal(err)
		}
	}
	clientset, err := kubernetes.NewForConfig(api.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := clientset.CoreV1().ServiceAccounts(sa.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a ServiceAccount token, %v", err)
	}
	return tr.Status.Token
}
