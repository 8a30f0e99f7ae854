package server

import (
	"context"
	"fmt"
	"net"
	"strconv"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/peer"
	"github.com/quotaplane/quotaplane/internal/server/pki"
)

// startPeers serves this replica's peer listener, announces it and its peer
// CA in the replica's Lease, makes admission ask the leading replica while
// this replica's engine does not lead (docs/replicas.md), and has caCheck
// compare its peer CA with the leader's.
func startPeers(o CompletedOptions, files pki.Files, caCheck *peer.CACheck) Component {
	return func(ctx context.Context, loopback *rest.Config) error {
		h := o.QuotaEngine
		if h == nil {
			return nil
		}
		cfg, err := peer.TLS(files)
		if err != nil {
			return err
		}
		ca, err := peer.ReadCA(files)
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
			if tcp, ok := addr.(*net.TCPAddr); ok && tcp.IP.IsUnspecified() {
				// Listening on every interface: peers dial the host's
				// own address, as the kube-apiserver advertises itself.
				ip, err := utilnet.ChooseHostInterface()
				if err != nil {
					return fmt.Errorf("the peer listener listens on every interface and no host address was found to announce (%w); set --peer-advertise-address", err)
				}
				advertise = net.JoinHostPort(ip.String(), strconv.Itoa(tcp.Port))
			}
		}
		kube, err := kubernetes.NewForConfig(loopback)
		if err != nil {
			return err
		}
		go peer.Announce(ctx, kube, o.SystemNamespace, o.Identity, advertise, ca)
		leader := func() *peer.Resolver {
			return &peer.Resolver{Client: kube, Namespace: o.SystemNamespace, EngineLease: formats.LeaseName, Self: o.Identity}
		}
		client, err := peer.NewClient(files, leader())
		if err != nil {
			return err
		}
		h.ForwardTo(client)
		caCheck.Start(ctx, leader(), ca, files)
		return nil
	}
}
