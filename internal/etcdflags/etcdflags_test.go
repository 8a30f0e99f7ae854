package etcdflags

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
)

func TestFlags(t *testing.T) {
	cases := map[string]struct {
		args       []string
		want       Etcd
		wantErrors []string
	}{
		"defaults": {
			want: Etcd{EtcdPrefix: "/registry"},
		},
		"every flag": {
			args: []string{"--etcd-servers", "https://etcd-0:2379,https://etcd-1:2379", "--etcd-prefix", "/quota",
				"--etcd-cafile", "ca.pem", "--etcd-certfile", "client.pem", "--etcd-keyfile", "client-key.pem"},
			want: Etcd{EtcdServers: []string{"https://etcd-0:2379", "https://etcd-1:2379"}, EtcdPrefix: "/quota",
				EtcdCAFile: "ca.pem", EtcdCertFile: "client.pem", EtcdKeyFile: "client-key.pem"},
		},
		"an empty prefix is the default": {
			args: []string{"--etcd-prefix", ""},
			want: Etcd{EtcdPrefix: "/registry"},
		},
		"malformed values": {
			args: []string{"--etcd-servers", "etcd-0:2379,http://etcd-1:2379,unix:///run/etcd", "--etcd-prefix", "registry"},
			want: Etcd{EtcdServers: []string{"etcd-0:2379", "http://etcd-1:2379", "unix:///run/etcd"}, EtcdPrefix: "registry"},
			wantErrors: []string{
				`--etcd-prefix "registry" must start with /`,
				`--etcd-servers entry "etcd-0:2379" must be an http:// or https:// URL`,
				`--etcd-servers entry "unix:///run/etcd" must be an http:// or https:// URL`,
			},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := Defaults()
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			o.AddFlags(fs, "what etcd is to this command")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			o.Complete()
			if diff := cmp.Diff(tc.want, o); diff != "" {
				t.Errorf("options (-want +got):\n%s", diff)
			}
			var gotErrors []string
			for _, err := range o.Validate() {
				gotErrors = append(gotErrors, err.Error())
			}
			if diff := cmp.Diff(tc.wantErrors, gotErrors); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

func TestServersUsageIsTheCommands(t *testing.T) {
	var o Etcd
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	o.AddFlags(fs, "URLs of the etcd this command reads.")
	if diff := cmp.Diff("URLs of the etcd this command reads.", fs.Lookup("etcd-servers").Usage); diff != "" {
		t.Errorf("--etcd-servers usage (-want +got):\n%s", diff)
	}
}
