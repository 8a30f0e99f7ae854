package clusters

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// proc is one quotaplane process of the test.
type proc struct {
	name   string
	args   []string
	bin    string
	cmd    *exec.Cmd
	stderr *quotatest.SyncBuffer
	exited chan struct{}
	// cleanup: the process is killed when its first test ends.
	cleanup bool
}

func (p *proc) start(t testing.TB, readyLine bool) {
	t.Helper()
	p.stderr, p.exited = &quotatest.SyncBuffer{}, make(chan struct{})
	p.cmd = exec.Command(p.bin, p.args...)
	p.cmd.Stderr = p.stderr
	stdout, err := p.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	banner := make(chan struct{})
	cmd, exited := p.cmd, p.exited
	go func() {
		s := bufio.NewScanner(stdout)
		if s.Scan() {
			close(banner)
		}
		for s.Scan() {
		}
		_ = cmd.Wait()
		close(exited)
	}()
	if !p.cleanup {
		// Once, for the test that started it first: a restart in a subtest
		// must outlive the subtest.
		p.cleanup = true
		t.Cleanup(func() { p.kill() })
	}
	if !readyLine {
		return
	}
	select {
	case <-banner:
	case <-exited:
		t.Fatalf("%s exited before it was ready:\n%s", p.name, p.stderr.Tail())
	case <-time.After(2 * time.Minute):
		t.Fatalf("%s was not ready within 2 minutes:\n%s", p.name, p.stderr.Tail())
	}
}

// stop ends the process with SIGTERM (SIGKILL after 30 s).
func (p *proc) stop() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		p.kill()
	}
}

func (p *proc) kill() {
	if p.cmd == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
	}
}

// cluster is a `quotaplane serve`: the quota plane or a member.
type cluster struct {
	proc
	dataDir    string
	kubeconfig string
	config     *rest.Config
	kube       kubernetes.Interface
	client     client.Client
}

func startCluster(t testing.TB, bin, name string) *cluster {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	c := &cluster{proc: proc{name: name, bin: bin, args: []string{"serve", "--data-dir", dir, "--secure-port", strconv.Itoa(quotatest.FreePort(t))}},
		dataDir: dir, kubeconfig: filepath.Join(dir, "admin.kubeconfig")}
	c.start(t, true)
	cfg, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst, cfg.Timeout = 500, 1000, 20*time.Second
	c.config = cfg
	c.kube = kubernetes.NewForConfigOrDie(cfg)
	c.client = quotatest.NewClient(t, cfg)
	return c
}

// webhookKubeconfig is a kubeconfig of the quota plane for a member's
// webhook: a service account bound to the shipped quotaplane-member-webhook
// role, nothing more.
func webhookKubeconfig(t testing.TB, quota *cluster, member string) string {
	t.Helper()
	ctx := context.Background()
	ns, name := "kube-system", fmt.Sprintf("webhook-%s-%d", member, quotatest.FreePort(t))
	sa, err := quota.kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-member-webhook"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	if _, err := quota.kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The identity speaks for its cluster only: a RoleBinding of the
	// shipped quotaplane-member-cluster in the cluster's namespace.
	clusterNS := members.Namespace(member)
	if _, err := quota.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	roleBinding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "quotaplane-member-cluster"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: sa.Name}}}
	if _, err := quota.kube.RbacV1().RoleBindings(clusterNS).Create(ctx, roleBinding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// RBAC authorizes from a cache: the webhook acts once it has both.
	user, groups := quotatest.ServiceAccountUser(ns, sa.Name)
	quotatest.WaitBound(t, quota.kube, user, groups, "quotaplane-member-webhook", "")
	quotatest.WaitBound(t, quota.kube, user, groups, "quotaplane-member-cluster", clusterNS)
	tok, err := quota.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tokenKubeconfig(t, quota, name, tok.Status.Token)
}

// tokenKubeconfig writes a kubeconfig of the quota plane whose user is
// token.
func tokenKubeconfig(t testing.TB, quota *cluster, name, token string) string {
	t.Helper()
	raw, err := clientcmd.LoadFromFile(quota.kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range raw.AuthInfos {
		*a = clientcmdapi.AuthInfo{Token: token}
	}
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*raw, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// webhook is a `quotaplane webhook` serving one member.
type webhook struct {
	proc
	port    int
	certDir string
	member  *cluster
	// quotaKubeconfig is its credential in the quota plane.
	quotaKubeconfig string
}

func startWebhook(t testing.TB, bin string, quota, member *cluster, prefix string) *webhook {
	t.Helper()
	var extra []string
	if prefix != "" {
		extra = append(extra, "--user-prefix", prefix, "--group-prefix", prefix)
	}
	return startWebhookWith(t, bin, member, webhookKubeconfig(t, quota, member.name), extra...)
}

// startWebhookWith starts a webhook of member reaching the quota plane with
// quotaKubeconfig, with the flags of startWebhook and extra.
func startWebhookWith(t testing.TB, bin string, member *cluster, quotaKubeconfig string, extra ...string) *webhook {
	t.Helper()
	w := &webhook{port: quotatest.FreePort(t), certDir: filepath.Join(t.TempDir(), "certs-"+member.name), member: member,
		quotaKubeconfig: quotaKubeconfig}
	args := []string{"webhook", "--quota-kubeconfig", w.quotaKubeconfig, "--kubeconfig", member.kubeconfig,
		"--cluster-name", member.name, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(w.port), "--cert-dir", w.certDir,
		"--reconcile-period", "2s", "--release-after", "6s", "--charge-after", "1s",
		"--exclude-namespaces", "quotaplane-system," + unchargedNamespace}
	w.proc = proc{name: "webhook " + member.name, bin: bin, args: append(args, extra...)}
	w.restart(t)
	return w
}

func (w *webhook) restart(t testing.TB) {
	t.Helper()
	w.start(t, false)
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	eventually(t, time.Minute, w.name+" ready", func(context.Context) error {
		select {
		case <-w.exited:
			t.Fatalf("%s exited:\n%s", w.name, w.stderr.Tail())
		default:
		}
		resp, err := hc.Get(fmt.Sprintf("https://127.0.0.1:%d/readyz", w.port))
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("readyz answered %d", resp.StatusCode)
		}
		return nil
	})
}

// review posts a review to the webhook as the member's API server would.
func (w *webhook) review(t testing.TB, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	t.Helper()
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Timeout: 20 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	resp, err := hc.Post(fmt.Sprintf("https://127.0.0.1:%d/validate", w.port), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := &admissionv1.AdmissionReview{}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil || out.Response == nil {
		t.Fatalf("%s answered %d with no AdmissionReview: %v", w.name, resp.StatusCode, err)
	}
	if out.Response.UID != req.UID {
		t.Errorf("%s answered review %s with UID %s", w.name, req.UID, out.Response.UID)
	}
	return out.Response
}

// register applies print-config's ValidatingWebhookConfiguration in the
// member and returns it.
func (w *webhook) register(t testing.TB, quota *cluster, exclude ...string) string {
	t.Helper()
	out, err := exec.Command(w.bin, "webhook", "print-config", "--quota-kubeconfig", quota.kubeconfig, "--kubeconfig", w.member.kubeconfig,
		"--cluster-name", w.member.name, "--cert-dir", w.certDir, "--url", fmt.Sprintf("https://127.0.0.1:%d/validate", w.port),
		"--exclude-namespaces", strings.Join(exclude, ",")).CombinedOutput()
	if err != nil {
		t.Fatalf("webhook print-config: %v\n%s", err, out)
	}
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := yaml.UnmarshalStrict(out, cfg); err != nil {
		t.Fatalf("print-config printed no ValidatingWebhookConfiguration: %v\n%s", err, out)
	}
	vwcs := w.member.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	ctx := context.Background()
	if old, err := vwcs.Get(ctx, cfg.Name, metav1.GetOptions{}); err == nil {
		cfg.ResourceVersion = old.ResourceVersion
		_, err = vwcs.Update(ctx, cfg, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	} else if _, err := vwcs.Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatalf("registering print-config's output in %s: %v\n%s", w.member.name, err, out)
	}
	return string(out)
}

func eventually(t testing.TB, timeout time.Duration, what string, check func(ctx context.Context) error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		err = check(ctx)
		cancel()
		if err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s: not within %s: %v", what, timeout, err)
}
