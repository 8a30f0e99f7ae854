package compat

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/convert"
	"github.com/quotaplane/quotaplane/internal/quota"
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

// TestUpgradeKeepsNumbers starts today's server on a data directory written
// by quotaplane before it took the reference's bucket names (commit
// cd97889, by TestWriteUpgradeFixture): every bucket is renamed
// bucket-<sha256> with the same numbers, its old name kept in a label and
// gone as a name, and every claim keeps its decision and amounts, its
// allocations naming the new buckets.
func TestUpgradeKeepsNumbers(t *testing.T) {
	dir := t.TempDir()
	if err := untar(filepath.Join("testdata", "upgrade-cd97889.tar.gz"), dir); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	var before upgradeState
	if err := json.Unmarshal(data, &before); err != nil {
		t.Fatal(err)
	}
	if len(before.Buckets) < 3 || len(before.Claims) < 4 {
		t.Fatalf("the fixture holds %d buckets and %d claims; want at least 3 and 4", len(before.Buckets), len(before.Claims))
	}
	o := quotatest.FastEngineOptions()
	s, err := testserver.Start(testserver.Options{DataDir: filepath.Join(dir, "data"), Engine: &o})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = s.Stop() }()
	c := quotatest.NewClient(t, s.Config)
	renamed := map[string]string{}
	for _, old := range before.Buckets {
		id := quota.BucketID{Consumer: convert.ConsumerID(old.Spec.ConsumerRef), ResourceType: string(old.Spec.ResourceType),
			Dims: convert.Dimensions(old.Spec.Dimensions).Key()}
		name := quota.BucketName(id)
		renamed[old.Name] = name
		if quota.LegacyBucketName(id) != old.Name {
			t.Fatalf("LegacyBucketName(%+v) = %s, but the old server named it %s", id, quota.LegacyBucketName(id), old.Name)
		}
		b := &quotav1alpha1.AllowanceBucket{}
		eventually(t, "bucket "+old.Name+" renamed "+name+" with its numbers", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: old.Namespace, Name: name}, b); err != nil {
				return false, err
			}
			st, was := b.Status, old.Status
			if st.Limit != was.Limit || st.Allocated != was.Allocated || st.Available != was.Available || st.ClaimCount != was.ClaimCount || st.GrantCount != was.GrantCount {
				return false, fmt.Errorf("shows %d/%d/%d (%d claims, %d grants), was %d/%d/%d (%d claims, %d grants)",
					st.Limit, st.Allocated, st.Available, st.ClaimCount, st.GrantCount, was.Limit, was.Allocated, was.Available, was.ClaimCount, was.GrantCount)
			}
			return true, nil
		})
		if got := b.Labels[quotav1alpha1.LabelLegacyName]; got != quota.LegacyBucketLabelValue(id) {
			t.Errorf("bucket %s: label %s = %q, want %q", name, quotav1alpha1.LabelLegacyName, got, quota.LegacyBucketLabelValue(id))
		}
		eventually(t, "the bucket under its old name "+old.Name+" goes", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: old.Namespace, Name: old.Name}, &quotav1alpha1.AllowanceBucket{})
			return apierrors.IsNotFound(err), err
		})
	}
	for _, old := range before.Claims {
		was := quotav1alpha1.ClaimDecision(old.Status.Conditions)
		if was == nil {
			t.Fatalf("claim %s was undecided in the fixture", old.Name)
		}
		cl := &quotav1alpha1.ResourceClaim{}
		eventually(t, "claim "+old.Name+" keeps its decision and names the new buckets", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, client.ObjectKey{Namespace: old.Namespace, Name: old.Name}, cl); err != nil {
				return false, err
			}
			now := quotav1alpha1.ClaimDecision(cl.Status.Conditions)
			if now == nil || now.Status != was.Status || now.Reason != was.Reason || cl.UID != old.UID {
				return false, fmt.Errorf("decision %+v, was %+v", now, was)
			}
			if len(cl.Status.Allocations) != len(old.Status.Allocations) {
				return false, fmt.Errorf("allocations %+v", cl.Status.Allocations)
			}
			for i, a := range cl.Status.Allocations {
				p := old.Status.Allocations[i]
				if a.AllocatedAmount != p.AllocatedAmount || a.Status != p.Status || a.AllocatingBucket != renamed[p.AllocatingBucket] {
					return false, fmt.Errorf("allocation %+v, was %+v (bucket now %s)", a, p, renamed[p.AllocatingBucket])
				}
			}
			return true, nil
		})
	}
}

// untar extracts a .tar.gz into dir.
func untar(file, dir string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		target := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(target, 0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(target), 0o700); err != nil {
				return err
			}
			out, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, os.FileMode(h.Mode)&0o700)
			if err != nil {
				return err
			}
			if _, err := io.Copy(out, tr); err != nil {
				_ = out.Close()
				return err
			}
			if err := out.Close(); err != nil {
				return err
			}
		}
	}
}
