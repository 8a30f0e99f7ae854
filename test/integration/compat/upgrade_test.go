package compat

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/testserver"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// upgradeState is what a data directory held when it was written: every
// bucket and claim, with its numbers.
type upgradeState struct {
	Buckets []quotav1alpha1.AllowanceBucket `json:"buckets"`
	Claims  []quotav1alpha1.ResourceClaim   `json:"claims"`
}

// TestWriteUpgradeFixture writes the data directory TestUpgradeKeepsNumbers
// starts from, with the code of the commit it runs at, when
// QUOTAPLANE_WRITE_UPGRADE_FIXTURE names a directory: buckets with and
// without dimensions, claims made by a policy and by hand.
func TestWriteUpgradeFixture(t *testing.T) {
	dir := os.Getenv("QUOTAPLANE_WRITE_UPGRADE_FIXTURE")
	if dir == "" {
		t.Skip("QUOTAPLANE_WRITE_UPGRADE_FIXTURE is not set: the committed fixture is used")
	}
	o := quotatest.FastEngineOptions()
	s, err := testserver.Start(testserver.Options{DataDir: filepath.Join(dir, "data"), Engine: &o, Fsync: true})
	if err != nil {
		t.Fatal(err)
	}
	c := quotatest.NewClient(t, s.Config)
	f := quotatest.NewFixture(t, c)
	ctx := context.Background()
	f.SecretsPolicy(3)
	for i := range 2 {
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: f.NS}}); err != nil {
			t.Fatal(err)
		}
	}
	f.WaitBucket(quotatest.N(3, 2, 1), "secrets")
	gold := []quotav1alpha1.Dimension{{Key: "tier", Value: "gold"}}
	f.Register("cpu")
	f.Grant("cpu", map[string][]quotatest.Bucket{"cpu": {{Amount: 10}, {Amount: 4, Dims: gold}}})
	f.Claim("cpu-a", quotatest.R("cpu", 3, gold...))
	f.Claim("cpu-b", quotatest.R("cpu", 2))
	f.Decided("cpu-a")
	f.Decided("cpu-b")
	f.WaitBucket(quotatest.N(4, 3, 1), "cpu", gold...)
	var st upgradeState
	bl := &quotav1alpha1.AllowanceBucketList{}
	if err := c.List(ctx, bl, client.InNamespace(f.BucketNS)); err != nil {
		t.Fatal(err)
	}
	st.Buckets = bl.Items
	cl := &quotav1alpha1.ResourceClaimList{}
	if err := c.List(ctx, cl, client.InNamespace(f.NS)); err != nil {
		t.Fatal(err)
	}
	st.Claims = cl.Items
	data, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "state.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
}
