package main

import (
	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/component-base/logs"
	logsapi "k8s.io/component-base/logs/api/v1"

	"github.com/quotaplane/quotaplane/internal/webhook"
	"github.com/quotaplane/quotaplane/internal/webhook/setup"
)

func newWebhookCommand() *cobra.Command {
	o := webhook.NewOptions()
	logOpts := logs.NewOptions()
	cmd := &cobra.Command{
		Use:   "webhook",
		Short: "Enforce the quota plane's ClaimCreationPolicies in a member cluster: a ValidatingAdmissionWebhook server (docs/clusters.md)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := logsapi.ValidateAndApply(logOpts, utilfeature.DefaultFeatureGate); err != nil {
				return err
			}
			return webhook.Run(genericapiserver.SetupSignalContext(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	addWebhookTestFlags(cmd.Flags(), o)
	logsapi.AddFlags(logOpts, cmd.Flags())
	cmd.AddCommand(newWebhookPrintConfigCommand(), newWebhookPrintRBACCommand())
	return cmd
}

func newWebhookPrintRBACCommand() *cobra.Command {
	var cluster string
	var r setup.RBACOptions
	cmd := &cobra.Command{
		Use:   "print-rbac",
		Short: "Print what the quota plane needs before a member cluster's webhook may speak for it: the cluster's namespace and the bindings of quotaplane-member-webhook and quotaplane-member-cluster",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return setup.PrintRBAC(cluster, r, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cluster, "cluster-name", cluster, "The member cluster's name in the quota plane. Required.")
	fs.StringVar(&r.ServiceAccount, "service-account", r.ServiceAccount, "The webhook's service account in the quota plane, as <namespace>/<name> (the one its --quota-kubeconfig uses).")
	fs.StringVar(&r.User, "user", r.User, "The webhook's user name in the quota plane, instead of --service-account.")
	return cmd
}

func newWebhookPrintConfigCommand() *cobra.Command {
	o := webhook.NewOptions()
	c := setup.NewConfigOptions()
	cmd := &cobra.Command{
		Use:   "print-config",
		Short: "Print the ValidatingWebhookConfiguration that registers the webhook in a member cluster, with rules for the kinds the quota plane's Ready policies govern",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return setup.PrintConfig(cmd.Context(), o, c, cmd.OutOrStdout())
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.QuotaKubeconfig, "quota-kubeconfig", o.QuotaKubeconfig, "Kubeconfig of the quota plane whose Ready ClaimCreationPolicies give the rules. Required.")
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "Kubeconfig of the member cluster, to name its resources as it serves them (optional: guessed from the kinds otherwise).")
	fs.StringVar(&o.ClusterName, "cluster-name", o.ClusterName, "The member cluster's name in the quota plane. Required.")
	fs.StringVar(&o.CertDir, "cert-dir", o.CertDir, "The webhook's --cert-dir, whose generated certificate is the CA bundle when --ca-file is not given.")
	fs.StringVar(&c.CAFile, "ca-file", c.CAFile, "CA bundle (PEM) that signed the webhook's serving certificate.")
	fs.StringVar(&c.URL, "url", c.URL, "The webhook's URL (https://host:port/validate), for a webhook outside the cluster; otherwise the Service below is used.")
	fs.StringVar(&c.ServiceNamespace, "service-namespace", c.ServiceNamespace, "Namespace of the webhook's Service.")
	fs.StringVar(&c.ServiceName, "service-name", c.ServiceName, "Name of the webhook's Service.")
	fs.Int32Var(&c.ServicePort, "service-port", c.ServicePort, "Port of the webhook's Service.")
	fs.StringSliceVar(&c.ExcludeNamespaces, "exclude-namespaces", c.ExcludeNamespaces, "Namespaces never sent to the webhook, besides kube-system, kube-public and kube-node-lease (the webhook's own, so that it can always start).")
	fs.Int32Var(&c.TimeoutSeconds, "timeout-seconds", c.TimeoutSeconds, "How long the member's API server waits for the webhook (1-30).")
	fs.StringVar(&c.KubeconfigSecret, "quota-kubeconfig-secret", c.KubeconfigSecret, "The webhook's --quota-kubeconfig-secret (<namespace>/<name>): also print a Role and RoleBinding letting its service account get and update that Secret only, where it keeps its refreshed token.")
	fs.StringVar(&c.ServiceAccount, "service-account", c.ServiceAccount, "The webhook's service account in the member cluster, <namespace>/<name>, for --quota-kubeconfig-secret (default: --service-namespace/--service-name, as the chart names both).")
	return cmd
}
