package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/engine/record"
	"github.com/quotaplane/quotaplane/internal/peer"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// startPeers serves this replica's peer listener, announces it in the
// replica's Lease, and makes admission ask the leading replica while this
// replica's engine does not lead (docs/replicas.md).
func startPeers(o CompletedOptions, files pki.Files) Component {
	return func(ctx context.Context, loopback *rest.Config) error {
		h := o.QuotaEngine
		if h == nil {
			return nil
		}
		cfg, err := peer.TLS(files)
		if err != nil {
			return err
		}
		addr, err := peer.Listen(ctx, net.JoinHostPort(o.bindIP.String(), strconv.Itoa(o.PeerPort)), cfg, &peer.Server{Handle: h})
		if err != nil {
			return fmt.Errorf("%w; choose another with --peer-port", err)
		}
		advertise := o.PeerAdvertiseAddress
		if advertise == "" {
			advertise = addr.String()
		}
		kube, err := kubernetes.NewForConfig(loopback)
		if err != nil {
			return err
		}
		go peer.Announce(ctx, kube, o.SystemNamespace, o.Identity, advertise)
		client, err := peer.NewClient(files, &peer.Resolver{Client: kube, Namespace: o.SystemNamespace, EngineLease: record.LeaseName, Self: o.Identity})
		if err != nil {
			return err
		}
		h.ForwardTo(client)
		return nil
	}
}
