package server

import (
	"fmt"
	"net"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/engine"
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
	// EtcdServers, when set, names an external etcd; nothing is embedded.
	EtcdServers []string
	// EtcdPrefix is the key prefix of every object in etcd.
	EtcdPrefix string

	// Listener, when set, is used instead of listening on
	// BindAddress:SecurePort. Tests pass a listener on a free port.
	Listener net.Listener
	// EtcdUnsafeNoFsync skips fsync in the embedded etcd. Only for tests.
	EtcdUnsafeNoFsync bool

	// QuotaEngine, when set, enables the ClaimCreationPolicy admission
	// plugin, which decides through this process's engine.
	QuotaEngine *engine.Handle
	// SystemNamespace holds claims for cluster-scoped objects.
	SystemNamespace string
}

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		DataDir:     ".quotaplane",
		BindAddress: "127.0.0.1",
		SecurePort:  6443,
		EtcdPrefix:  "/registry",
	}
}

// AddFlags registers the flags of serve.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.DataDir, "data-dir", o.DataDir, "Directory for etcd data (when embedded), certificates and admin.kubeconfig.")
	fs.StringVar(&o.BindAddress, "bind-address", o.BindAddress, "IP address to serve the API on.")
	fs.IntVar(&o.SecurePort, "secure-port", o.SecurePort, "HTTPS port to serve the API on.")
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, "Comma-separated URLs of an external etcd cluster. When empty, etcd runs embedded under --data-dir.")
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "Prefix of every key quotaplane writes in etcd.")
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
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = "/registry"
	}
	c.bindIP = net.ParseIP(c.BindAddress)
	if c.Listener != nil {
		addr := c.Listener.Addr().(*net.TCPAddr)
		c.bindIP, c.SecurePort = addr.IP, addr.Port
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
	if !strings.HasPrefix(o.EtcdPrefix, "/") {
		errs = append(errs, fmt.Errorf("--etcd-prefix %q must start with /", o.EtcdPrefix))
	}
	for _, s := range o.EtcdServers {
		if !strings.HasPrefix(s, "http://") && !strings.HasPrefix(s, "https://") {
			errs = append(errs, fmt.Errorf("--etcd-servers entry %q must be an http:// or https:// URL", s))
		}
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
