package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// minTokenDuration is the shortest token the API server issues
// (TokenRequest's expirationSeconds is at least 600).
const minTokenDuration = 10 * time.Minute

func newKubeconfigCommand() *cobra.Command {
	var kubeconfig, dataDir, project, organization, serviceAccount, server string
	var duration time.Duration
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print a kubeconfig for a project's or organization's control plane, or for a service account",
		Long: `kubeconfig prints a kubeconfig for the server the given kubeconfig reaches (--kubeconfig, else
--data-dir's admin.kubeconfig, else $KUBECONFIG, else ~/.kube/config).

With neither --project, --organization nor --service-account, it prints that kubeconfig's current context
whole (the admin kubeconfig of a data directory, say), certificates included: in a pod of the chart's quota
plane, which has no shell, kubectl exec <pod> -- quotaplane kubeconfig --data-dir /var/lib/quotaplane
--server https://<service>:6443 prints its admin kubeconfig for the Service's address.

With --project or --organization, its current context reaches that control plane served by quotaplane
serve: the same credentials, the plane's URL. kubectl needs nothing else.

With --service-account <namespace>/<name>, it asks the server for a token of that service account
(TokenRequest, valid for --duration) and prints a kubeconfig with the same server and CA whose user is
that token: the service account's view, for a tenant or a member of staff. The service account lives at
the root; with --project or --organization the kubeconfig reaches that plane as it.

For a member cluster's webhook (its --quota-kubeconfig), give a longer --duration, say 168h, so that a
webhook down for a while still starts: the webhook mints its own successors before the token is 60%
through its life and keeps them in its kubeconfig Secret, once the service account may create its own
serviceaccounts/token (quotaplane webhook print-rbac --service-account prints that Role; docs/clusters.md).

  quotaplane kubeconfig --data-dir .quotaplane --project web > web.kubeconfig
  kubectl --kubeconfig web.kubeconfig get namespaces
  quotaplane kubeconfig --kubeconfig ~/.kube/config --organization acme
  kubectl create serviceaccount owner -n organization-acme
  quotaplane kubeconfig --data-dir .quotaplane --service-account organization-acme/owner > acme.kubeconfig
  quotaplane kubeconfig --kubeconfig quota-plane-admin.kubeconfig --service-account kube-system/webhook-east \
    --duration 168h > quota-plane.kubeconfig

See docs/control-planes.md for who may use a plane.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p *planes.Plane
			switch {
			case project != "" && organization != "":
				return fmt.Errorf("give --project or --organization, not both")
			case project != "":
				p = &planes.Plane{Kind: planes.Projects, Name: project}
			case organization != "":
				p = &planes.Plane{Kind: planes.Organizations, Name: organization}
			}
			var saNamespace, saName string
			if serviceAccount != "" {
				var err error
				if saNamespace, saName, err = splitServiceAccount(serviceAccount); err != nil {
					return err
				}
				if duration < minTokenDuration {
					return fmt.Errorf("--duration %s is shorter than the %s the API server issues tokens for at least", duration, minTokenDuration)
				}
			}
			path := clientconfig.Path(kubeconfig, dataDir)
			cfg, err := clientconfig.Load(path)
			if err != nil {
				return err
			}
			name, planePath := "root", ""
			if p != nil {
				dyn, err := dynamic.NewForConfig(cfg)
				if err != nil {
					return err
				}
				if err := planes.Find(cmd.Context(), dyn, *p); err != nil {
					return err
				}
				name, planePath = string(p.Kind)+"-"+p.Name, p.Path()
			}
			var out []byte
			if serviceAccount == "" {
				out, err = clientconfig.ForPlane(path, name, server, planePath)
			} else {
				var token string
				if token, err = serviceAccountToken(cmd.Context(), cfg, saNamespace, saName, duration); err != nil {
					return err
				}
				out, err = clientconfig.ForToken(path, name+"-"+saNamespace+"-"+saName, server, planePath, token)
			}
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(out)
			return err
		},
	}
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "the kubeconfig of the server (default: --data-dir's, $KUBECONFIG, ~/.kube/config)")
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the data directory of a local quotaplane serve (its admin.kubeconfig)")
	cmd.Flags().StringVar(&project, "project", "", "the project whose control plane to reach")
	cmd.Flags().StringVar(&organization, "organization", "", "the organization whose control plane to reach")
	cmd.Flags().StringVar(&serviceAccount, "service-account", "", "<namespace>/<name>: the service account (at the root) the kubeconfig authenticates as, with a token")
	cmd.Flags().StringVar(&server, "server", "", "the server URL the kubeconfig names instead of the loaded one's (a Service's or a load balancer's address; its certificate must name it, serve --tls-san)")
	cmd.Flags().DurationVar(&duration, "duration", 24*time.Hour, "how long the --service-account token is valid (at least 10m; the server may shorten it); a member webhook refreshes its own, so give it a week (168h) to start with")
	return cmd
}

// splitServiceAccount reads --service-account's <namespace>/<name>.
func splitServiceAccount(s string) (namespace, name string, err error) {
	namespace, name, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("--service-account %q: want <namespace>/<name>, for example organization-acme/owner", s)
	}
	return namespace, name, nil
}

// serviceAccountToken asks the server for a token of the service account,
// valid for d.
func serviceAccountToken(ctx context.Context, cfg *rest.Config, namespace, name string, d time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	seconds := int64(d / time.Second)
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", fmt.Errorf("there is no service account %s in namespace %s to make a token for: create it (kubectl create serviceaccount %s -n %s), bind it the roles it needs, and ask again",
			name, namespace, name, namespace)
	case err != nil:
		return "", fmt.Errorf("asking for a token of service account %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}
