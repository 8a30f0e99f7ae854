package engine

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/policy/governed"
)

// TestExemptNamespacesFlag: serve's and controller's
// --quota-exempt-namespaces, with its default, and the system namespace
// always exempt whatever it says.
func TestExemptNamespacesFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"kube-node-lease", "kube-public", "kube-system", "quotaplane-system"}},
		{[]string{"--quota-exempt-namespaces=ops,kube-system"}, []string{"kube-system", "ops", "quotaplane-system"}},
		{[]string{"--quota-exempt-namespaces="}, []string{"quotaplane-system"}},
		{[]string{"--quota-exempt-namespaces=ops", "--system-namespace=quota"}, []string{"ops", "quota"}},
	} {
		o := DefaultOptions()
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		o.AddFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, governed.NewExemptions(o.SystemNamespace, o.ExemptNamespaces).Namespaces()); diff != "" {
			t.Errorf("%v: exempt namespaces (-want +got):\n%s", tc.args, diff)
		}
	}
}
