package crd

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
)

// TestGeneratedFilesUpToDate regenerates deepcopy functions and CRDs from the
// API types into a temporary directory and compares them with the checked-in
// files. Run hack/update-generated.sh when it fails. TestClientsUpToDate does
// the same for the typed clients.
func TestGeneratedFilesUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds controller-gen")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	gen := func(args ...string) {
		t.Helper()
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"),
			append([]string{"tool", "-modfile=hack/tools/go.mod", "controller-gen"}, args...)...)
		cmd.Dir = root
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("controller-gen %v: %v\n%s", args, err, b)
		}
	}
	for _, pkg := range []string{"api/quota/v1alpha1", "api/resourcemanager/v1alpha1"} {
		dir := filepath.Join(out, "object", filepath.FromSlash(pkg))
		gen("object:headerFile=hack/boilerplate.go.txt", "paths=./"+pkg, "output:object:dir="+dir)
		compare(t, filepath.Join(dir, "zz_generated.deepcopy.go"), filepath.Join(root, pkg, "zz_generated.deepcopy.go"))
	}
	gen("crd:crdVersions=v1", "paths=./api/...", "output:crd:dir="+filepath.Join(out, "crd"))

	fresh, _ := filepath.Glob(filepath.Join(out, "crd", "*.yaml"))
	fresh = slices.DeleteFunc(fresh, func(f string) bool { return filepath.Base(f) == NeverStored })
	compare(t, filepath.Join(out, "crd", NeverStored), filepath.Join(root, "config/crd/review", NeverStored))
	checkedIn, _ := filepath.Glob(filepath.Join(root, "config/crd/bases", "*.yaml"))
	if len(fresh) != len(checkedIn) {
		t.Fatalf("controller-gen writes %d CRDs, %d are checked in; run hack/update-generated.sh", len(fresh), len(checkedIn))
	}
	for _, f := range fresh {
		compare(t, f, filepath.Join(root, "config/crd/bases", filepath.Base(f)))
	}
}

func compare(t *testing.T, fresh, checkedIn string) {
	t.Helper()
	want, err := os.ReadFile(fresh)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(checkedIn)
	if err != nil {
		t.Fatalf("%s is missing; run hack/update-generated.sh", checkedIn)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("%s is stale; run hack/update-generated.sh", checkedIn)
	}
}

// TestClientsUpToDate regenerates the typed clients (pkg/client: clientset,
// listers, informers, apply configurations) into a temporary directory and
// compares them, file for file, with the checked-in ones. Run
// hack/update-clients.sh when it fails.
func TestClientsUpToDate(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the Kubernetes code generators")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(root, "hack", "update-clients.sh"), out)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "PATH="+filepath.Join(runtime.GOROOT(), "bin")+string(os.PathListSeparator)+os.Getenv("PATH"))
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("hack/update-clients.sh: %v\n%s", err, b)
	}
	files := func(dir string) map[string]bool {
		t.Helper()
		found := map[string]bool{}
		err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				rel, _ := filepath.Rel(dir, p)
				found[rel] = true
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return found
	}
	fresh, checkedIn := files(filepath.Join(out, "pkg", "client")), files(filepath.Join(root, "pkg", "client"))
	for f := range fresh {
		if !checkedIn[f] {
			t.Errorf("pkg/client/%s is missing; run hack/update-clients.sh", f)
			continue
		}
		compare(t, filepath.Join(out, "pkg", "client", f), filepath.Join(root, "pkg", "client", f))
	}
	for f := range checkedIn {
		if !fresh[f] {
			t.Errorf("pkg/client/%s is no longer generated; run hack/update-clients.sh", f)
		}
	}
}
