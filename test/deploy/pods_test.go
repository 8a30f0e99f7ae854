package deploy_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// A pod of a rendered StatefulSet run as a local process from the image's
// root filesystem, as a kubelet and a container runtime would run it, but
// on this machine's loopback: its own copy of the root (hard links), chroot
// into it, the user of its securityContext, the container's arguments and
// environment as rendered, and its volumes as directories and files at
// their mount paths. What cannot be as in a cluster is substituted, and
// only this (substitutions):
//
//  1. Downward API: status.podIP is 127.0.0.1; metadata.name is the pod's
//     name (<statefulset>-<ordinal>).
//  2. Addresses: every container port N of every pod is a free port P on
//     127.0.0.1, one per (pod, N). In the pod's own arguments, N after a
//     wildcard or loopback address (0.0.0.0:N, 127.0.0.1:N: the pod IP
//     once substituted) and as a flag's whole value (--secure-port=N) is P;
//     in any pod's arguments, the pod's DNS name through its StatefulSet's
//     governing Service with port N (<pod>.<service>.<namespace>.svc:N) is
//     127.0.0.1:P. Listening addresses 0.0.0.0 are 127.0.0.1.
//  3. Volumes: a volumeClaimTemplate or emptyDir is an empty directory owned
//     by the pod's fsGroup; a Secret volume holds the rendered Secret's keys
//     (its items, defaultMode) owned by root and the fsGroup.
//
// The root filesystem is not read-only, but every file of the image is
// root's and no directory of it but the data directory (the image's own)
// is writable by the pod's user, who is not root.
type pod struct {
	Name    string
	root    string
	ports   map[int32]int // container port -> local port
	c       corev1.Container
	cmd     *exec.Cmd
	exited  chan struct{}
	started time.Time
	Stderr  *quotatest.SyncBuffer
}

// podsOf returns the pods of a rendered StatefulSet, ports assigned.
func podsOf(t *testing.T, sts *appsv1.StatefulSet, taken map[int]bool) []*pod {
	t.Helper()
	var pods []*pod
	for i := range int(*sts.Spec.Replicas) {
		p := &pod{Name: fmt.Sprintf("%s-%d", sts.Name, i), ports: map[int32]int{}, c: sts.Spec.Template.Spec.Containers[0],
			exited: make(chan struct{}), Stderr: &quotatest.SyncBuffer{}}
		for _, cp := range p.c.Ports {
			// A port freed is offered again: none is given twice.
			for {
				if port := quotatest.FreePort(t); !taken[port] {
					taken[port], p.ports[cp.ContainerPort] = true, port
					break
				}
			}
		}
		pods = append(pods, p)
	}
	return pods
}

// port returns the local port of the container port named or numbered as
// a probe names it.
func (p *pod) port(t *testing.T, name string, number int32) int {
	t.Helper()
	for _, cp := range p.c.Ports {
		if (name != "" && cp.Name == name) || (name == "" && cp.ContainerPort == number) {
			return p.ports[cp.ContainerPort]
		}
	}
	t.Fatalf("pod %s has no container port %q/%d", p.Name, name, number)
	return 0
}

// substitute applies substitutions 1 and 2 to the pod's arguments and
// environment; all are every pod of the render, by DNS name.
func (p *pod) args(t *testing.T, sts *appsv1.StatefulSet, namespace string, all map[string]*pod) (args, env []string) {
	t.Helper()
	vars := map[string]string{}
	for _, e := range p.c.Env {
		switch {
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			vars[e.Name] = "127.0.0.1"
		case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.name":
			vars[e.Name] = p.Name
		case e.ValueFrom != nil:
			t.Fatalf("pod %s: env %s comes from %v, which this test does not substitute", p.Name, e.Name, e.ValueFrom)
		default:
			vars[e.Name] = e.Value
		}
		env = append(env, e.Name+"="+vars[e.Name])
	}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	podHost := regexp.MustCompile(`([a-z0-9-]+)\.([a-z0-9-]+)\.` + regexp.QuoteMeta(namespace) + `\.svc:(\d+)`)
	local := regexp.MustCompile(`(0\.0\.0\.0|127\.0\.0\.1):(\d+)`)
	flagPort := regexp.MustCompile(`^(--[a-z-]+)=(\d+)$`)
	for _, a := range append(append([]string{}, p.c.Command...), p.c.Args...) {
		a = ref.ReplaceAllStringFunc(a, func(m string) string {
			if v, ok := vars[m[2:len(m)-1]]; ok {
				return v
			}
			return m
		})
		a = podHost.ReplaceAllStringFunc(a, func(m string) string {
			s := podHost.FindStringSubmatch(m)
			other, ok := all[s[1]]
			if !ok {
				t.Fatalf("pod %s names %s, which is no pod of the render", p.Name, m)
			}
			n, _ := strconv.Atoi(s[3])
			return fmt.Sprintf("127.0.0.1:%d", other.ports[int32(n)])
		})
		a = local.ReplaceAllStringFunc(a, func(m string) string {
			s := local.FindStringSubmatch(m)
			n, _ := strconv.Atoi(s[2])
			if lp, ok := p.ports[int32(n)]; ok {
				return fmt.Sprintf("127.0.0.1:%d", lp)
			}
			return "127.0.0.1:" + s[2]
		})
		if s := flagPort.FindStringSubmatch(a); s != nil {
			n, _ := strconv.Atoi(s[2])
			if lp, ok := p.ports[int32(n)]; ok {
				a = fmt.Sprintf("%s=%d", s[1], lp)
			}
		}
		a = strings.ReplaceAll(a, "=0.0.0.0", "=127.0.0.1")
		args = append(args, a)
	}
	return args, env
}

// prepare makes the pod's root from the image's (hard links) and its
// volumes (substitution 3).
func (p *pod) prepare(t *testing.T, imageRoot string, spec corev1.PodSpec, claims []corev1.PersistentVolumeClaim, secrets map[string]*corev1.Secret) {
	t.Helper()
	p.root = filepath.Join(t.TempDir(), p.Name)
	err := filepath.WalkDir(imageRoot, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(imageRoot, path)
		target := filepath.Join(p.root, rel)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return os.Link(path, target)
		}
		if err := os.Mkdir(target, info.Mode().Perm()); err != nil {
			return err
		}
		st := info.Sys().(*syscall.Stat_t)
		if err := os.Chown(target, int(st.Uid), int(st.Gid)); err != nil {
			return err
		}
		return os.Chmod(target, info.Mode()&(fs.ModePerm|fs.ModeSticky|fs.ModeSetgid))
	})
	if err != nil {
		t.Fatal(err)
	}
	group := int(*spec.SecurityContext.FSGroup)
	volumes := map[string]corev1.Volume{}
	for _, v := range spec.Volumes {
		volumes[v.Name] = v
	}
	for _, c := range claims {
		volumes[c.Name] = corev1.Volume{Name: c.Name, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}
	}
	for _, m := range p.c.VolumeMounts {
		v, ok := volumes[m.Name]
		if !ok {
			t.Fatalf("pod %s mounts volume %s, which it does not have", p.Name, m.Name)
		}
		dir := filepath.Join(p.root, m.MountPath)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		switch {
		case v.EmptyDir != nil:
			if err := os.Chown(dir, 0, group); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(dir, 0o2775|fs.ModeSetgid); err != nil {
				t.Fatal(err)
			}
		case v.Secret != nil:
			s, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("pod %s mounts Secret %s, which the render does not make", p.Name, v.Secret.SecretName)
			}
			mode := fs.FileMode(0o644)
			if v.Secret.DefaultMode != nil {
				mode = fs.FileMode(*v.Secret.DefaultMode)
			}
			items := v.Secret.Items
			if len(items) == 0 {
				for k := range s.Data {
					items = append(items, corev1.KeyToPath{Key: k, Path: k})
				}
			}
			for _, it := range items {
				data, ok := s.Data[it.Key]
				if !ok {
					t.Fatalf("pod %s mounts key %s of Secret %s, which has no such key", p.Name, it.Key, s.Name)
				}
				f := filepath.Join(dir, it.Path)
				if err := os.WriteFile(f, data, mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chown(f, 0, group); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(f, mode); err != nil {
					t.Fatal(err)
				}
			}
		default:
			t.Fatalf("pod %s: volume %s is of a kind this test does not make", p.Name, m.Name)
		}
	}
}

// start runs the pod's container: the image's entrypoint with the
// container's arguments, chrooted into the pod's root, as the user of the
// securityContext.
func (p *pod) start(t *testing.T, image *v1.Config, spec corev1.PodSpec, args, env []string) {
	t.Helper()
	if len(p.c.Command) > 0 {
		t.Fatalf("pod %s sets a command; this test runs the image's entrypoint %v", p.Name, image.Entrypoint)
	}
	sc := p.c.SecurityContext
	uid, gid := uint32(*sc.RunAsUser), uint32(*sc.RunAsGroup)
	fsGroup := uint32(*spec.SecurityContext.FSGroup)
	argv := append(append([]string{}, image.Entrypoint...), args...)
	p.cmd = &exec.Cmd{Path: image.Entrypoint[0], Args: argv, Env: append(append([]string{}, image.Env...), env...), Dir: "/",
		Stdout: p.Stderr, Stderr: p.Stderr,
		SysProcAttr: &syscall.SysProcAttr{Chroot: p.root, Credential: &syscall.Credential{Uid: uid, Gid: gid, Groups: []uint32{fsGroup}},
			Pdeathsig: syscall.SIGKILL}}
	p.started = time.Now()
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting pod %s (%v): %v", p.Name, argv, err)
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.exited
	})
}

// exec runs a command in the pod's container as kubectl exec would: the
// image's binary in the pod's root, as its user, with its environment.
func (p *pod) exec(t *testing.T, image *v1.Config, args ...string) []byte {
	t.Helper()
	sc := p.c.SecurityContext
	cmd := &exec.Cmd{Path: image.Entrypoint[0], Args: append([]string{image.Entrypoint[0]}, args...), Env: image.Env, Dir: "/",
		SysProcAttr: &syscall.SysProcAttr{Chroot: p.root, Credential: &syscall.Credential{Uid: uint32(*sc.RunAsUser), Gid: uint32(*sc.RunAsGroup)}}}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("exec in pod %s: %v: %v\n%s", p.Name, args, err, stderr)
	}
	return out
}

// probe runs a rendered HTTP probe once, as a kubelet does (no certificate
// check, 1 s): nil when it passes.
func (p *pod) probe(ctx context.Context, t *testing.T, pr *corev1.Probe) error {
	h := pr.HTTPGet
	scheme := "http"
	if h.Scheme == corev1.URISchemeHTTPS {
		scheme = "https"
	}
	port := p.port(t, h.Port.StrVal, h.Port.IntVal)
	c := &http.Client{Timeout: time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // kubelet's probes do not check certificates either
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s://127.0.0.1:%d%s", scheme, port, h.Path), nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode >= 400 {
		return fmt.Errorf("%s %s: %s", req.Method, req.URL, resp.Status)
	}
	return nil
}

// waitReady waits until the pod's readiness probe passes, as its
// StatefulSet would before counting it ready.
func (p *pod) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(t.Context(), 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.exited:
			return false, fmt.Errorf("pod %s exited", p.Name)
		default:
		}
		last = p.probe(ctx, t, p.c.ReadinessProbe)
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("pod %s is not ready after %s (%v; last probe: %v); its log:\n%s", p.Name, timeout, err, last, tail(p.Stderr.String(), 40))
	}
	t.Logf("pod %s ready %s after its start", p.Name, time.Since(p.started).Round(time.Millisecond))
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
