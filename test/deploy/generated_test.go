package deploy_test

import (
	"bytes"
	"flag"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/quotaplane/quotaplane/test/deploy"
)

var update = flag.Bool("update", false, "rewrite deploy/manifests/quotaplane.yaml and the chart's copies of the CRDs and ClusterRoles instead of comparing them")

// TestGenerated compares what is generated from the chart and from config/
// with what the repository holds: the plain manifests, the chart's CRDs
// (config/crd/bases) and its ClusterRoles (config/rbac/roles.yaml). With
// -update it writes them.
func TestGenerated(t *testing.T) {
	t.Run("CRDs", func(t *testing.T) {
		want := readDir(t, filepath.Join(deploy.Root, "config", "crd", "bases"))
		dir := filepath.Join(deploy.ChartDir, "crds")
		if *update {
			if err := os.RemoveAll(dir); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for name, data := range want {
				write(t, filepath.Join(dir, name), data)
			}
		}
		got := readDir(t, dir)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("deploy/chart/quotaplane/crds is not config/crd/bases (-config +chart):\n%s\nrun: go test ./test/deploy -run TestGenerated -update", diff)
		}
	})
	t.Run("ClusterRoles", func(t *testing.T) {
		want := read(t, filepath.Join(deploy.Root, "config", "rbac", "roles.yaml"))
		compareOrUpdate(t, filepath.Join(deploy.ChartDir, "files", "roles.yaml"), want)
	})
	t.Run("Manifests", func(t *testing.T) {
		c, err := deploy.LoadChart()
		if err != nil {
			t.Fatal(err)
		}
		want, err := deploy.Manifests(c)
		if err != nil {
			t.Fatal(err)
		}
		compareOrUpdate(t, filepath.Join(deploy.Root, "deploy", "manifests", "quotaplane.yaml"), want)
	})
}

func compareOrUpdate(t *testing.T, path string, want []byte) {
	t.Helper()
	if *update {
		write(t, path, want)
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v; run: go test ./test/deploy -run TestGenerated -update", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is stale (-want +got):\n%s\nrun: go test ./test/deploy -run TestGenerated -update", path, cmp.Diff(string(want), string(got)))
	}
}

func readDir(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	for _, e := range entries {
		if !e.IsDir() && slices.Contains([]string{".yaml", ".yml"}, filepath.Ext(e.Name())) {
			files[e.Name()] = read(t, filepath.Join(dir, e.Name()))
		}
	}
	return files
}

func read(t *testing.T, path string) []byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func write(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}
