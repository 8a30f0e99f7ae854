package deploy_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/quotaplane/quotaplane/internal/ociimage"
	"github.com/quotaplane/quotaplane/test/deploy"
	"github.com/quotaplane/quotaplane/test/quotatest"
	"github.com/quotaplane/quotaplane/test/tools"
)

// planeValues install the quota plane alone: three serve replicas on three
// etcd members the chart runs.
func planeValues() map[string]any {
	return map[string]any{"webhook": map[string]any{"enabled": false}, "plane": map[string]any{"enabled": true}}
}

const (
	planeName = "qp-quotaplane-plane"
	etcdName  = "qp-quotaplane-etcd"
)

// TestChartPlane: the plane's render — replicas and etcd members as
// StatefulSets updated one pod at a time, disruption budgets that keep all
// but one, probes, the shared material as Secrets — and the values it
// refuses, each with what to set.
func TestChartPlane(t *testing.T) {
	r := render(t, planeValues())
	for _, name := range []string{planeName, etcdName} {
		sts := typed[appsv1.StatefulSet](t, r.find(t, "StatefulSet", name))
		if *sts.Spec.Replicas != 3 {
			t.Errorf("StatefulSet %s has %d replicas, want 3", name, *sts.Spec.Replicas)
		}
		if u := sts.Spec.UpdateStrategy; u.Type != appsv1.RollingUpdateStatefulSetStrategyType || (u.RollingUpdate != nil && u.RollingUpdate.MaxUnavailable != nil && u.RollingUpdate.MaxUnavailable.IntValue() != 1) {
			t.Errorf("StatefulSet %s updates with %+v; want a rolling update of one pod at a time", name, u)
		}
		c := sts.Spec.Template.Spec.Containers[0]
		if c.Image != ociimage.Reference {
			t.Errorf("StatefulSet %s runs image %s; want the one hack/image builds, %s", name, c.Image, ociimage.Reference)
		}
		if c.ReadinessProbe == nil || c.LivenessProbe == nil {
			t.Errorf("StatefulSet %s's container lacks a readiness or liveness probe", name)
		}
		checkPodSecurity(t, &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Template: sts.Spec.Template}})
		pdb := typed[policyv1.PodDisruptionBudget](t, r.find(t, "PodDisruptionBudget", name))
		if pdb.Spec.MaxUnavailable == nil || pdb.Spec.MaxUnavailable.IntValue() != 1 {
			t.Errorf("PodDisruptionBudget %s allows %v unavailable, want 1", name, pdb.Spec.MaxUnavailable)
		}
	}
	for _, name := range []string{planeName + "-pki", etcdName + "-pki", etcdName + "-client"} {
		r.find(t, "Secret", name)
	}
	// The shared CA key makes any identity: only serve's pods mount it, and
	// no pod of the plane gets an API token it does not need.
	all := render(t, map[string]any{"clusterName": testClusterName, "quotaPlane": map[string]any{"kubeconfigSecret": kubeconfigSecret},
		"controller": map[string]any{"enabled": true}, "plane": map[string]any{"enabled": true}})
	for _, o := range all {
		var spec corev1.PodSpec
		switch o.GetKind() {
		case "StatefulSet":
			spec = typed[appsv1.StatefulSet](t, o).Spec.Template.Spec
			if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
				t.Errorf("StatefulSet %s mounts a service-account token; the plane's pods need none", o.GetName())
			}
		case "Deployment":
			spec = typed[appsv1.Deployment](t, o).Spec.Template.Spec
		default:
			continue
		}
		for _, v := range spec.Volumes {
			if v.Secret != nil && v.Secret.SecretName == planeName+"-pki" && o.GetName() != planeName {
				t.Errorf("%s %s mounts the plane's CA key (Secret %s); only serve's replicas may", o.GetKind(), o.GetName(), v.Secret.SecretName)
			}
		}
	}
	if r.has("Deployment", webhookName) {
		t.Error("the webhook is rendered with webhook.enabled false")
	}

	for _, tc := range []struct {
		plane map[string]any
		want  string
	}{
		{map[string]any{"enabled": true, "etcd": map[string]any{"replicas": 2}}, "plane.etcd.replicas is 2: give an odd number"},
		{map[string]any{"enabled": true, "replicas": 0}, "plane.replicas is 0: run at least one replica"},
		{map[string]any{"enabled": true, "etcd": map[string]any{"managed": false}}, "plane.etcd.external.servers is empty"},
	} {
		_, err := deploy.Render(loadChart(t), testRelease, map[string]any{"webhook": map[string]any{"enabled": false}, "plane": tc.plane}, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("plane %v: got %v, want an error saying %q", tc.plane, err, tc.want)
		}
	}
	// External etcd: no members, serve pointed at the given URLs and Secret.
	ext := render(t, map[string]any{"webhook": map[string]any{"enabled": false}, "plane": map[string]any{"enabled": true,
		"etcd": map[string]any{"managed": false, "external": map[string]any{"servers": []any{"https://etcd.example:2379"}, "secretName": "my-etcd"}}}})
	if ext.has("StatefulSet", etcdName) || ext.has("Secret", etcdName+"-pki") {
		t.Error("etcd members are rendered with plane.etcd.managed false")
	}
	args := strings.Join(typed[appsv1.StatefulSet](t, ext.find(t, "StatefulSet", planeName)).Spec.Template.Spec.Containers[0].Args, " ")
	for _, want := range []string{"--etcd-servers=https://etcd.example:2379", "--etcd-certfile=/etc/quotaplane/etcd/tls.crt"} {
		if !strings.Contains(args, want) {
			t.Errorf("serve's arguments with an external etcd lack %s: %s", want, args)
		}
	}
}

// TestImageNamesAgree: the image hack/image builds is the one the chart and
// deploy/manifests name, at the chart's appVersion.
func TestImageNamesAgree(t *testing.T) {
	c := loadChart(t)
	if c.Metadata.AppVersion != ociimage.Version {
		t.Errorf("the chart's appVersion is %s, the image's version %s", c.Metadata.AppVersion, ociimage.Version)
	}
	manifests := string(read(t, filepath.Join(deploy.Root, "deploy", "manifests", "quotaplane.yaml")))
	if !strings.Contains(manifests, "image: "+ociimage.Reference+"\n") {
		t.Errorf("deploy/manifests/quotaplane.yaml does not name the image hack/image builds, %s", ociimage.Reference)
	}
}

// imageTarball is the image .ci/run built (QUOTAPLANE_IMAGE), or, outside
// CI, one built here from the tests' shared binary as hack/image does.
func imageTarball(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("QUOTAPLANE_IMAGE"); p != "" {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("QUOTAPLANE_IMAGE is not set: .ci/run builds the image (go run ./hack/image) and names it there")
	}
	img, err := ociimage.Build(ociimage.Options{Binary: quotatest.BuildBinary(t)})
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "quotaplane-image.tar")
	if _, err := ociimage.Write(img, ociimage.Reference, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestThePlaneRunsFromTheImage starts what the chart renders for the quota
// plane — three etcd members and three serve replicas — from the image's
// root filesystem, each as the user its securityContext names, with the
// arguments, environment and files of the render and only the
// substitutions pods_test.go lists. A governed create is decided through
// each replica; one is killed (the engine's leader) and creates are still
// decided through the others; the shared Secrets, looked up on the running
// plane, render unchanged.
func TestThePlaneRunsFromTheImage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six processes from the image")
	}
	if os.Geteuid() != 0 {
		// As a container runtime: chroot and another user need root.
		if tools.InCI() {
			t.Fatal("CI=true but the tests do not run as root: the pods run chrooted into the image's root filesystem as the user their securityContext names, which needs root")
		}
		t.Skip("not root: the pods run chrooted into the image's root filesystem as the user their securityContext names, which needs root. With CI=true this test fails instead.")
	}
	began := time.Now()
	imageRoot := filepath.Join(t.TempDir(), "rootfs")
	image, err := ociimage.Extract(imageTarball(t), imageRoot)
	if err != nil {
		t.Fatal(err)
	}
	if image.User != "65532:65532" || len(image.Entrypoint) != 1 {
		t.Fatalf("the image runs %v as %q; want one entrypoint, as 65532:65532", image.Entrypoint, image.User)
	}
	objs := render(t, planeValues())
	secrets := map[string]*corev1.Secret{}
	for _, o := range objs {
		if o.GetKind() == "Secret" {
			s := typed[corev1.Secret](t, o)
			secrets[s.Name] = s
		}
	}
	etcdSet := typed[appsv1.StatefulSet](t, objs.find(t, "StatefulSet", etcdName))
	serveSet := typed[appsv1.StatefulSet](t, objs.find(t, "StatefulSet", planeName))
	for _, sts := range []*appsv1.StatefulSet{etcdSet, serveSet} {
		if u := *sts.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser; fmt.Sprint(u)+":"+fmt.Sprint(u) != image.User {
			t.Errorf("StatefulSet %s runs as %d, the image as %s", sts.Name, u, image.User)
		}
	}
	taken := map[int]bool{}
	etcdPods, servePods := podsOf(t, etcdSet, taken), podsOf(t, serveSet, taken)
	all := map[string]*pod{}
	for _, p := range append(append([]*pod{}, etcdPods...), servePods...) {
		all[p.Name] = p
	}
	run := func(sts *appsv1.StatefulSet, pods []*pod) {
		for _, p := range pods {
			p.prepare(t, imageRoot, sts.Spec.Template.Spec, sts.Spec.VolumeClaimTemplates, secrets)
			args, env := p.args(t, sts, testRelease.Namespace, all)
			t.Logf("%s: %s", p.Name, strings.Join(args, " "))
			p.start(t, image, sts.Spec.Template.Spec, args, env)
		}
		for _, p := range pods {
			p.waitReady(t, 3*time.Minute)
		}
	}
	run(etcdSet, etcdPods)
	t.Logf("etcd members ready %s after the start", time.Since(began).Round(time.Millisecond))
	run(serveSet, servePods)
	t.Logf("serve replicas ready %s after the start", time.Since(began).Round(time.Millisecond))
	for _, p := range append(append([]*pod{}, etcdPods...), servePods...) {
		if uid := processUID(t, p); uid != "65532" {
			t.Errorf("pod %s runs as uid %s, want 65532 (its securityContext and the image's user)", p.Name, uid)
		}
	}
	// etcd accepts serve alone: a client that trusts its CA but has no
	// certificate of it is refused.
	etcdCA := x509.NewCertPool()
	etcdCA.AppendCertsFromPEM(secrets[etcdName+"-pki"].Data["ca.crt"])
	if err := readFrom(fmt.Sprintf("127.0.0.1:%d", etcdPods[0].ports[2379]), &tls.Config{RootCAs: etcdCA}); err == nil {
		t.Error("an etcd member answered a client without a certificate")
	}

	// The admin credentials, as docs/deploying.md says to get them (the
	// image has no shell): `kubectl exec <pod> -- quotaplane kubeconfig
	// --data-dir /var/lib/quotaplane --server <address>`; one CA and one
	// admin certificate for every replica.
	kubeconfig := servePods[0].exec(t, image, "kubeconfig", "--data-dir", "/var/lib/quotaplane",
		"--server", fmt.Sprintf("https://127.0.0.1:%d", servePods[1].ports[6443]))
	admin, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if want := fmt.Sprintf("https://127.0.0.1:%d", servePods[1].ports[6443]); admin.Host != want {
		t.Errorf("quotaplane kubeconfig --server %s printed a kubeconfig for %s", want, admin.Host)
	}
	configs := map[*pod]*rest.Config{}
	for _, p := range servePods {
		cfg := rest.CopyConfig(admin)
		cfg.Host = fmt.Sprintf("https://127.0.0.1:%d", p.ports[6443])
		cfg.Timeout = 30 * time.Second
		configs[p] = cfg
	}

	const limit = 6
	f := quotatest.NewFixture(t, quotatest.NewClient(t, configs[servePods[0]]))
	p := f.SecretsPolicy(limit)
	created := 0
	create := func(through *pod) error {
		kube := kubernetes.NewForConfigOrDie(configs[through])
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d-%s", created, through.Name), Namespace: f.NS}}
		_, err := kube.CoreV1().Secrets(f.NS).Create(t.Context(), s, metav1.CreateOptions{})
		if err == nil {
			created++
		}
		return err
	}
	for _, rp := range servePods {
		g := *f
		g.C = quotatest.NewClient(t, configs[rp])
		g.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}, p.Name, p.Generation)
		if err := create(rp); err != nil {
			t.Fatalf("a create through %s within the limit: %v", rp.Name, err)
		}
	}

	// The engine's leader is killed; the other replicas decide.
	kube := kubernetes.NewForConfigOrDie(configs[servePods[0]])
	lease, err := kube.CoordinationV1().Leases("quotaplane-system").Get(t.Context(), "quotaplane-quota-engine", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var killed *pod
	for _, rp := range servePods {
		if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == rp.Name {
			killed = rp
		}
	}
	if killed == nil {
		t.Fatalf("the engine's Lease is held by %q, no replica's name (--replica-identity=$(POD_NAME))", deref(lease.Spec.HolderIdentity))
	}
	if err := killed.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-killed.exited
	t.Logf("killed %s, the engine's leader", killed.Name)
	killedAt := time.Now()
	var survivors []*pod
	for _, rp := range servePods {
		if rp != killed {
			survivors = append(survivors, rp)
		}
	}
	// Until the Lease expires (15 s) a follower may answer 504 (no leader
	// reachable): a client retries it. Every other answer is a decision.
	decide := func(through *pod) error {
		var last error
		err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 90*time.Second, true, func(context.Context) (bool, error) {
			last = create(through)
			return last == nil || apierrors.IsForbidden(last), nil
		})
		if err != nil {
			return fmt.Errorf("no decision through %s within 90s: %v (last: %v)", through.Name, err, last)
		}
		return last
	}
	for created < limit {
		if err := decide(survivors[created%2]); err != nil {
			t.Fatalf("create %d (within the limit of %d) after the leader was killed: %v", created+1, limit, err)
		}
	}
	t.Logf("decided through the survivors %s after the kill", time.Since(killedAt).Round(time.Millisecond))
	for _, rp := range survivors {
		if err := decide(rp); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "quota") {
			t.Errorf("a create over the limit through %s: %v; want a quota refusal", rp.Name, err)
		}
	}
	// Read through a survivor: the killed replica may have been the one
	// the fixture was made with.
	g := *f
	g.C = quotatest.NewClient(t, configs[survivors[0]])
	g.WaitBucket(quotatest.N(limit, limit, 0), "secrets")

	// The shared Secrets are made once: a render that looks them up on the
	// running plane (as helm upgrade does) keeps them.
	kube = kubernetes.NewForConfigOrDie(configs[survivors[0]])
	for _, s := range secrets {
		s.Namespace = testRelease.Namespace
		if _, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().Secrets(s.Namespace).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	again, err := deploy.Render(loadChart(t), testRelease, planeValues(), configs[survivors[0]])
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range again {
		if o.GetKind() != "Secret" {
			continue
		}
		s := typed[corev1.Secret](t, o)
		for k, v := range secrets[s.Name].Data {
			if string(s.Data[k]) != string(v) {
				t.Errorf("an upgrade's render changed %s of Secret %s", k, s.Name)
			}
		}
	}
	for _, rp := range servePods {
		if n := strings.Count(rp.Stderr.String(), "Failed to update lease"); n > 0 {
			t.Errorf("replica %s logged %q %d times", rp.Name, "Failed to update lease", n)
		}
	}
	t.Logf("whole test %s", time.Since(began).Round(time.Millisecond))
}

// processUID is the real user id of the pod's process.
func processUID(t *testing.T, p *pod) string {
	t.Helper()
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(status), "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "Uid:" {
			return f[1]
		}
	}
	t.Fatalf("no Uid in /proc/%d/status", p.cmd.Process.Pid)
	return ""
}

// readFrom completes a TLS handshake with addr and reads: a server that
// requires a client certificate refuses the client here (TLS 1.3 checks
// it after the client's side of the handshake is done).
func readFrom(addr string, cfg *tls.Config) error {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n")); err != nil {
		return err
	}
	_, err = conn.Read(make([]byte, 1))
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
