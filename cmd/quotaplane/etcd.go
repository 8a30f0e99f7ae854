package main

import (
	"github.com/spf13/cobra"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/quotaplane/quotaplane/internal/etcdmember"
)

func newEtcdCommand() *cobra.Command {
	o := etcdmember.NewOptions()
	cmd := &cobra.Command{
		Use:   "etcd",
		Short: "Run a member of an etcd cluster (etcd 3.6, etcd's flags), for serve replicas to share: the image and the chart need no other",
		Long: `etcd runs one member of an etcd cluster, the etcd quotaplane embeds (3.6), with etcd's own flags
for what a quota plane's cluster needs: TLS for clients and peers, the initial cluster, the timings.
docs/operations.md gives a three-member recipe.

  quotaplane etcd --name etcd-0 --data-dir /var/lib/etcd \
    --listen-client-urls https://10.0.0.10:2379 --listen-peer-urls https://10.0.0.10:2380 \
    --initial-cluster etcd-0=https://10.0.0.10:2380,etcd-1=https://10.0.0.11:2380,etcd-2=https://10.0.0.12:2380 \
    --cert-file server.crt --key-file server.key --trusted-ca-file ca.crt --client-cert-auth \
    --peer-cert-file peer.crt --peer-key-file peer.key --peer-trusted-ca-file ca.crt --peer-client-cert-auth`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return etcdmember.Run(genericapiserver.SetupSignalContext(), o)
		},
	}
	o.AddFlags(cmd.Flags())
	return cmd
}
