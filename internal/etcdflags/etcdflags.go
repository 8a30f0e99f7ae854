package etcdflags

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// DefaultPrefix is the default --etcd-prefix, the API server's.
const DefaultPrefix = "/registry"

// Etcd is how a command reaches etcd. Commands embed it in their options,
// so its fields are named as the options of those commands.
type Etcd struct {
	// EtcdServers are the URLs of the etcd cluster.
	EtcdServers []string
	// EtcdPrefix is the key prefix of every object in etcd.
	EtcdPrefix string
	// EtcdCAFile, EtcdCertFile and EtcdKeyFile secure the connection: the CA
	// that signed etcd's serving certificate, and the client certificate and
	// key quotaplane presents.
	EtcdCAFile, EtcdCertFile, EtcdKeyFile string
}

// Defaults returns the defaults.
func Defaults() Etcd {
	return Etcd{EtcdPrefix: DefaultPrefix}
}

// AddFlags registers the flags. serversUsage is --etcd-servers' help: what
// the etcd is to this command, and what happens without it.
func (o *Etcd) AddFlags(fs *pflag.FlagSet, serversUsage string) {
	fs.StringSliceVar(&o.EtcdServers, "etcd-servers", o.EtcdServers, serversUsage)
	fs.StringVar(&o.EtcdPrefix, "etcd-prefix", o.EtcdPrefix, "Prefix of every key quotaplane serve writes in etcd.")
	fs.StringVar(&o.EtcdCAFile, "etcd-cafile", o.EtcdCAFile, "CA certificate that signed the serving certificate of the etcd given by --etcd-servers.")
	fs.StringVar(&o.EtcdCertFile, "etcd-certfile", o.EtcdCertFile, "Client certificate quotaplane presents to etcd; needs --etcd-keyfile.")
	fs.StringVar(&o.EtcdKeyFile, "etcd-keyfile", o.EtcdKeyFile, "Private key of --etcd-certfile; needs --etcd-certfile.")
}

// Complete fills in the default prefix.
func (o *Etcd) Complete() {
	if o.EtcdPrefix == "" {
		o.EtcdPrefix = DefaultPrefix
	}
}

// Validate reports every malformed value: a prefix that is not a path, a
// server that is not an http:// or https:// URL. Which combinations a
// command accepts (TLS files without servers, a certificate without its key)
// is the command's to check.
func (o Etcd) Validate() []error {
	var errs []error
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
