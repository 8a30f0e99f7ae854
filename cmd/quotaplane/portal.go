package main

import (
	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/quotaplane/quotaplane/internal/clientconfig"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/portal"
)

func newPortalCommand() *cobra.Command {
	o := portal.StandaloneOptions{Listen: "127.0.0.1:8444", SystemNamespace: engine.DefaultOptions().SystemNamespace}
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "portal",
		Short: "Serve the web portal for a cluster where quotaplane controller runs (serve has it built in at /portal/)",
		Long: "Serve the tenant and staff portal (docs/self-service.md) at /portal/, for the cluster of --kubeconfig. " +
			"Users sign in with their own bearer token; the portal passes /api and /apis to the cluster with it, so RBAC decides what each sees. " +
			"The kubeconfig's identity only reads (buckets, requests, organizations, projects, RoleBindings, the decision histories).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := clientconfig.Load(kubeconfig)
			if err != nil {
				return err
			}
			return portal.RunStandalone(genericapiserver.SetupSignalContext(), cfg, o)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&kubeconfig, "kubeconfig", "", "Kubeconfig of the cluster (default: $KUBECONFIG, then ~/.kube/config).")
	fs.StringVar(&o.Listen, "listen", o.Listen, "Address to serve the portal on; plain HTTP only on a loopback address.")
	fs.StringVar(&o.CertFile, "tls-cert-file", "", "Certificate to serve HTTPS with.")
	fs.StringVar(&o.KeyFile, "tls-private-key-file", "", "Private key of --tls-cert-file.")
	fs.StringVar(&o.SystemNamespace, "system-namespace", o.SystemNamespace, "Namespace of the decision histories (the engine's --system-namespace).")
	return cmd
}
