package server

import (
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/tools/leaderelection"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/observe"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/etcdflags"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/portal"
	"github.com/quotaplane/quotaplane/internal/server/kubecontrollers"
)

// Options are the settings of quotaplane serve.
type Options struct {
	// DataDir holds etcd's data (when embedded), the certificates and the
	// admin kubeconfig.
	DataDir string
	// BindAddress is the IP address the API server listens on.
	BindAddress string
	// SecurePort is the HTTPS port of the API server.
	SecurePort int
	// RequestTimeout cuts a request that takes longer (kube-apiserver's
	// --request-timeout); the engine's hold period must exceed it.
	RequestTimeout time.Duration
	// Etcd, when EtcdServers is set, names an external etcd, and nothing is
	// embedded; EtcdCAFile, EtcdCertFile and EtcdKeyFile then secure the
	// connection to it. The API server's storage and the quota engine's own
	// etcd client both use them. EtcdPrefix is the key prefix of every object.
	etcdflags.Etcd

	// Listener, when set, is used instead of listening on
	// BindAddress:SecurePort. Tests pass a listener on a free port.
	Listener net.Listener
	// EtcdUnsafeNoFsync skips fsync in the embedded etcd. Only for tests.
	EtcdUnsafeNoFsync bool

	// QuotaEngine, when set, enables the ClaimCreationPolicy admission
	// plugin, which decides through this process's engine.
	QuotaEngine *route.Handle
	// QuotaMetrics, when set, adds the engine's quota state to /metrics.
	QuotaMetrics *observe.Exporter
	// SystemNamespace holds claims for cluster-scoped objects and the Lease
	// of the upstream controllers.
	SystemNamespace string
	// TrustedMemberClusters are the member clusters whose user and group
	// names the quota plane takes as its own (clusters sharing its identity
	// provider); every other cluster's names are mapped to <cluster>:<name>
	// (docs/clusters.md). Only serve's flag sets it: a platform
	// administrator's, never a webhook's.
	TrustedMemberClusters []string
	// PlatformNamespaces are, besides SystemNamespace, the namespaces whose
	// ResourceGrants may name any consumer and only the platform writes.
	PlatformNamespaces []string
	// ExemptNamespaces are, besides SystemNamespace, the namespaces whose
	// objects no ClaimCreationPolicy charges (the engine's
	// --quota-exempt-namespaces; internal/policy/governed).
	ExemptNamespaces []string
	// ReservedLabelPrefix is the label prefix on Organizations and Projects
	// only the platform may set; group grants select only on it.
	ReservedLabelPrefix string
	// NoPortal turns the web portal at /portal/ off.
	NoPortal bool
	// CRDStorage serves quotaplane's own kinds as CustomResourceDefinitions,
	// as serve did before they were served natively (docs/native-storage.md).
	// Hidden: only for comparing the two and for testing the upgrade.
	CRDStorage bool
	// PortalURL is the portal's address as users reach it, which quota
	// refusals link to; empty: https://<bind address>:<port>/portal/.
	PortalURL string
	// KubeControllers tunes the leader election of the upstream controllers
	// (garbage collector, namespace deletion, ResourceQuota): only the replica
	// holding their Lease runs them. Namespace defaults to SystemNamespace and
	// Identity to one that is stable across restarts of this data directory.
	KubeControllers kubecontrollers.Options
	// PeerPort is the port of the peer listener, where a replica whose
	// engine does not lead asks the one that does (docs/replicas.md); 0: a
	// free port chosen at start (replicas find it in the replica's Lease).
	PeerPort int
	// PeerAdvertiseAddress is host:port other replicas reach the peer
	// listener at; empty: the bind address and the peer port.
	PeerAdvertiseAddress string
	// Identity is this replica's: the engine's Lease names it, and its
	// replica Lease carries it. Default KubeControllers.Identity.
	Identity string
	// TLSSANs are more names and addresses the generated serving
	// certificate covers: a Service's DNS name, a load balancer's address.
	TLSSANs []string
	// SharedPKIDir holds the material every replica shares (the CA, the
	// service-account key and the peer CA, pki.SharedFiles): copied into
	// <data-dir>/pki at every start, so a mounted Secret is its source.
	SharedPKIDir string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		DataDir:     ".quotaplane",
		BindAddress: "127.0.0.1",
		SecurePort:  6443,
		Etcd:        etcdflags.Defaults(),

		RequestTimeout: 60 * time.Second,

		SystemNamespace:     engine.DefaultOptions().SystemNamespace,
		PlatformNamespaces:  []string{"milo-system"},
		ExemptNamespaces:    engine.DefaultOptions().ExemptNamespaces,
		ReservedLabelPrefix: quotav1alpha1.DefaultReservedLabelPrefix,
		KubeControllers:     kubecontrollers.DefaultOptions(),
	}
}

// AddFlags registers the flags of serve.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&o.PlatformNamespaces, "platform-namespaces", o.PlatformNamespaces, "Namespaces, besides the system namespace and those labelled quota.miloapis.com/platform=true, "+
		"whose ResourceGrants may name any consumer and that only the platform writes (milo-system: manifests written for the reference implementation work unchanged).")
	fs.StringSliceVar(&o.TrustedMemberClusters, "trust-member-cluster-identities", o.TrustedMemberClusters, "Member clusters (by --cluster-name) whose user and group names the quota plane takes as its own, for clusters that share its identity provider; "+
		"system: names are still never taken. Every other cluster's names are mapped to <cluster>:<name>, whatever its webhook sends (docs/clusters.md).")
	fs.StringVar(&o.ReservedLabelPrefix, "reserved-label-prefix", o.ReservedLabelPrefix, "Label prefix on Organizations and Projects that only the platform may set; group grants (spec.consumerSelector) select only on it.")
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for etcd data (when embedded), certificates and admin.kubeconfig.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "IP address to serve the API on.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "HTTPS port to serve the API on.")
	fs.DurationVar(&o.RequestTimeout, "request-timeout", o.RequestTimeout, "How long a request may take before it is cut (as kube-apiserver's flag); a grant is held --request-timeout plus 10 s unless --hold-period says otherwise.")
	fs.IntVar(&o.PeerPort, "peer-port", o.PeerPort, "Port of the peer listener, on --bind-address, where replicas whose quota engine does not lead ask the one that does (mutual TLS with the replicas' shared pki/peer-ca.crt; docs/replicas.md). 0 (the default) chooses a free port at start, which the replica announces in its Lease; set a fixed one when a firewall sits between replicas.")
	fs.StringVar(&o.PeerAdvertiseAddress, "peer-advertise-address", o.PeerAdvertiseAddress, "host:port the other replicas reach this replica's peer listener at. Default: --bind-address and --peer-port.")
	fs.BoolVar(&o.CRDStorage, "serve-kinds-as-crds", o.CRDStorage, "Serve quota.miloapis.com and resourcemanager.miloapis.com as CustomResourceDefinitions instead of natively (docs/native-storage.md); for comparisons and upgrade tests only.")
	_ = fs.MarkHidden("serve-kinds-as-crds")
	fs.BoolVar(&o.NoPortal, "no-portal", o.NoPortal, "Do not serve the web portal at /portal/ (docs/self-service.md).")
	fs.StringVar(&o.PortalURL, "portal-url", o.PortalURL, "The portal's address as users reach it (behind a proxy or a load balancer), which quota refusals link to. Default: https://<bind-address>:<secure-port>/portal/.")
	fs.StringVar(&o.KubeControllers.Identity, "replica-identity", o.KubeControllers.Identity, "This replica's name in its Leases, the same across its restarts and unique among the replicas (a StatefulSet pod's name). Default: serve-<host name>-<hash of --data-dir>.")
	fs.StringSliceVar(&o.TLSSANs, "tls-san", o.TLSSANs, "More DNS names and IP addresses the generated serving certificate covers (a Service's name, a load balancer's address), besides localhost, the loopback and bind addresses and the host name.")
	fs.StringVar(&o.SharedPKIDir, "shared-pki-dir", o.SharedPKIDir, "A directory (a mounted Secret) holding what every replica shares: ca.crt, ca.key, service-account.key, peer-ca.crt and peer-ca.key. Copied into <data-dir>/pki at every start; a certificate signed by a replaced CA is signed again (docs/operations.md).")
	o.Etcd.AddFlags(fs, "Comma-separated URLs of an external etcd cluster. When empty, etcd runs embedded under --data-dir.")
}

// CompletedOptions are Options with defaults filled in and paths made absolute.
type CompletedOptions struct {
	*completedOptions
}

type completedOptions struct {
	Options
	bindIP net.IP
}

// Complete fills in defaults.
func (o *Options) Complete() (CompletedOptions, error) {
	c := &completedOptions{Options: *o}
	if c.DataDir == "" {
		c.DataDir = ".quotaplane"
	}
	abs, err := filepath.Abs(c.DataDir)
	if err != nil {
		return CompletedOptions{}, fmt.Errorf("resolving --data-dir %q: %w", c.DataDir, err)
	}
	c.DataDir = abs
	c.Etcd.Complete()
	if c.SystemNamespace == "" {
		c.SystemNamespace = engine.DefaultOptions().SystemNamespace
	}
	le, def := &c.KubeControllers, kubecontrollers.DefaultOptions()
	if le.Namespace == "" {
		le.Namespace = c.SystemNamespace
	}
	if le.Identity == "" {
		le.Identity = engine.StableIdentity("serve", c.DataDir)
	}
	if le.LeaseDuration == 0 && le.RenewDeadline == 0 && le.RetryPeriod == 0 {
		le.LeaseDuration, le.RenewDeadline, le.RetryPeriod = def.LeaseDuration, def.RenewDeadline, def.RetryPeriod
	}
	c.bindIP = net.ParseIP(c.BindAddress)
	if c.Listener != nil {
		addr := c.Listener.Addr().(*net.TCPAddr)
		c.bindIP, c.SecurePort = addr.IP, addr.Port
	}
	if c.Identity == "" {
		c.Identity = le.Identity
	}
	if c.PortalURL == "" && !c.NoPortal {
		c.PortalURL = fmt.Sprintf("https://%s%s", net.JoinHostPort(c.bindIP.String(), strconv.Itoa(c.SecurePort)), portal.Prefix)
	}
	return CompletedOptions{c}, nil
}

// Validate reports every invalid option.
func (o CompletedOptions) Validate() []error {
	var errs []error
	if o.bindIP == nil {
		errs = append(errs, fmt.Errorf("--bind-address %q is not an IP address; use for example 127.0.0.1 or 0.0.0.0", o.BindAddress))
	}
	if o.Listener == nil && (o.SecurePort < 1 || o.SecurePort > 65535) {
		errs = append(errs, fmt.Errorf("--secure-port %d is out of range; use a port between 1 and 65535", o.SecurePort))
	}
	if o.RequestTimeout <= 0 {
		errs = append(errs, fmt.Errorf("--request-timeout %s must be positive; the default is 60s", o.RequestTimeout))
	}
	if o.PeerPort < 0 || o.PeerPort > 65535 {
		errs = append(errs, fmt.Errorf("--peer-port %d is out of range; use a port between 1 and 65535 other than --secure-port, or 0 for a free one", o.PeerPort))
	}
	if o.PeerPort != 0 && o.PeerPort == o.SecurePort {
		errs = append(errs, fmt.Errorf("--peer-port %d is --secure-port too; give the peer listener a port of its own", o.PeerPort))
	}
	if a := o.PeerAdvertiseAddress; a != "" {
		if _, port, err := net.SplitHostPort(a); err != nil || port == "" {
			errs = append(errs, fmt.Errorf("--peer-advertise-address %q is not host:port; use for example 10.0.0.5:6444", a))
		}
	}
	if id := o.KubeControllers.Identity; id != "" && (len(id) > 63 || strings.ContainsAny(id, " \t\n/")) {
		errs = append(errs, fmt.Errorf("--replica-identity %q: want a name of at most 63 characters without spaces or '/', such as the pod's name", id))
	}
	for _, c := range o.TrustedMemberClusters {
		if err := members.ValidateName(c); err != nil {
			errs = append(errs, fmt.Errorf("--trust-member-cluster-identities: %w", err))
		}
	}
	errs = append(errs, o.Etcd.Validate()...)
	errs = append(errs, o.validateEtcdTLS()...)
	errs = append(errs, o.validateLeaderElection()...)
	return errs
}

func (o CompletedOptions) validateEtcdTLS() []error {
	if o.EtcdCAFile == "" && o.EtcdCertFile == "" && o.EtcdKeyFile == "" {
		return nil
	}
	var errs []error
	if len(o.EtcdServers) == 0 {
		errs = append(errs, errors.New("--etcd-cafile, --etcd-certfile and --etcd-keyfile are for an external etcd: give its URLs with --etcd-servers, or drop them to use the embedded etcd (which accepts only this server, over mutual TLS with certificates it keeps in <data-dir>/pki/etcd)"))
	}
	for _, s := range o.EtcdServers {
		if strings.HasPrefix(s, "http://") {
			errs = append(errs, fmt.Errorf("--etcd-servers entry %q is plain HTTP but etcd TLS files were given; use its https:// URL", s))
		}
	}
	if o.EtcdCertFile != "" && o.EtcdKeyFile == "" {
		errs = append(errs, errors.New("--etcd-certfile needs --etcd-keyfile: give the private key of the client certificate"))
	}
	if o.EtcdKeyFile != "" && o.EtcdCertFile == "" {
		errs = append(errs, errors.New("--etcd-keyfile needs --etcd-certfile: give the client certificate of the key"))
	}
	return errs
}

func (o CompletedOptions) validateLeaderElection() []error {
	le := o.KubeControllers
	var errs []error
	if le.RetryPeriod <= 0 {
		errs = append(errs, fmt.Errorf("--leader-elect-retry-period %s must be positive", le.RetryPeriod))
	}
	if le.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(le.RetryPeriod)) {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline %s must be more than 1.2 times --leader-elect-retry-period %s", le.RenewDeadline, le.RetryPeriod))
	}
	if le.LeaseDuration <= le.RenewDeadline {
		errs = append(errs, fmt.Errorf("--leader-elect-lease-duration %s must be longer than --leader-elect-renew-deadline %s", le.LeaseDuration, le.RenewDeadline))
	}
	return errs
}

// kubeconfigServerHost is the host the admin kubeconfig points at: loopback
// when the server listens on every address.
func (o CompletedOptions) kubeconfigServerHost() string {
	ip := o.bindIP
	if ip.IsUnspecified() {
		ip = net.IPv4(127, 0, 0, 1)
	}
	return net.JoinHostPort(ip.String(), fmt.Sprint(o.SecurePort))
}

func (o CompletedOptions) kubeconfigPath() string {
	return filepath.Join(o.DataDir, "admin.kubeconfig")
}
