package server_test

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/internal/server"
)

func TestValidateEtcdTLSAndLeaderElection(t *testing.T) {
	const external = "https://etcd.example:2379"
	tests := []struct {
		name   string
		change func(*server.Options)
		want   []string
	}{
		{
			name:   "defaults",
			change: func(*server.Options) {},
		},
		{
			name: "all three files with an external etcd",
			change: func(o *server.Options) {
				o.EtcdServers = []string{external}
				o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = "ca.crt", "client.crt", "client.key"
			},
		},
		{
			name: "only a CA with an external etcd",
			change: func(o *server.Options) {
				o.EtcdServers = []string{external}
				o.EtcdCAFile = "ca.crt"
			},
		},
		{
			name: "files without --etcd-servers",
			change: func(o *server.Options) {
				o.EtcdCAFile, o.EtcdCertFile, o.EtcdKeyFile = "ca.crt", "client.crt", "client.key"
			},
			want: []string{"--etcd-cafile, --etcd-certfile and --etcd-keyfile are for an external etcd: give its URLs with --etcd-servers, or drop them to use the embedded etcd (which accepts only this server, over mutual TLS with certificates it keeps in <data-dir>/pki/etcd)"},
		},
		{
			name: "certfile without keyfile",
			change: func(o *server.Options) {
				o.EtcdServers = []string{external}
				o.EtcdCAFile, o.EtcdCertFile = "ca.crt", "client.crt"
			},
			want: []string{"--etcd-certfile needs --etcd-keyfile: give the private key of the client certificate"},
		},
		{
			name: "keyfile without certfile",
			change: func(o *server.Options) {
				o.EtcdServers = []string{external}
				o.EtcdKeyFile = "client.key"
			},
			want: []string{"--etcd-keyfile needs --etcd-certfile: give the client certificate of the key"},
		},
		{
			name: "files with a plain HTTP etcd",
			change: func(o *server.Options) {
				o.EtcdServers = []string{"http://127.0.0.1:2379"}
				o.EtcdCAFile = "ca.crt"
			},
			want: []string{`--etcd-servers entry "http://127.0.0.1:2379" is plain HTTP but etcd TLS files were given; use its https:// URL`},
		},
		{
			name: "renew deadline not shorter than the lease",
			change: func(o *server.Options) {
				o.KubeControllers.LeaseDuration, o.KubeControllers.RenewDeadline = 5*time.Second, 5*time.Second
			},
			want: []string{"--leader-elect-lease-duration 5s must be longer than --leader-elect-renew-deadline 5s"},
		},
		{
			name: "retry period too long for the renew deadline",
			change: func(o *server.Options) {
				o.KubeControllers.RetryPeriod = 9 * time.Second
			},
			want: []string{"--leader-elect-renew-deadline 10s must be more than 1.2 times --leader-elect-retry-period 9s"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := server.NewOptions()
			o.DataDir = t.TempDir()
			tc.change(o)
			completed, err := o.Complete()
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, err := range completed.Validate() {
				got = append(got, err.Error())
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Validate() errors (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompleteKubeControllersLeaderElection(t *testing.T) {
	o := server.NewOptions()
	o.DataDir = t.TempDir()
	o.SystemNamespace = "ops"
	completed, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	again, err := o.Complete()
	if err != nil {
		t.Fatal(err)
	}
	le := completed.KubeControllers
	if le.Namespace != "ops" {
		t.Errorf("the Lease namespace is %q; want the system namespace %q", le.Namespace, "ops")
	}
	if le.Identity == "" || le.Identity != again.KubeControllers.Identity {
		t.Errorf("identities %q and %q; want one stable, non-empty identity per data directory", le.Identity, again.KubeControllers.Identity)
	}
}
