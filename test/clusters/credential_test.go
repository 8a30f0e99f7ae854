package clusters

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/webhook/credential"
	"github.com/quotaplane/quotaplane/internal/webhook/setup"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// rotation is a member whose webhook reaches the quota plane with a
// service-account token it refreshes every second (the test builds'
// --quota-token-refresh-every) and saves in the member's kubeconfig Secret.
type rotation struct {
	*world
	member *cluster
	wh     *webhook
	// saNS and saName are the webhook's service account in the quota plane.
	saNS, saName string
	// original is the token the kubeconfig file holds, bound to the quota
	// plane's Secret anchor: deleting anchor invalidates it.
	original credential.Token
	anchor   string
	// secret is the member's Secret holding the quota-plane kubeconfig.
	secret string
}

const kubeconfigSecretNS = "quotaplane-system"

func newRotation(t *testing.T) *rotation {
	t.Helper()
	ctx := context.Background()
	r := &rotation{world: newWorld(t, 2000), saNS: "kube-system", saName: "webhook-rot", anchor: "webhook-rot-original", secret: "quota-plane-kubeconfig"}
	r.member = startCluster(t, r.bin, "rot")
	r.members = append(r.members, r.member)
	r.allowClaims(t, r.member.name+":quotaplane-admin")
	if err := r.member.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: r.f.NS}}); err != nil {
		t.Fatal(err)
	}

	// The quota plane: the service account, what print-rbac prints for it
	// (its bindings and the Role to mint its own tokens), and its first
	// token, bound to a Secret of the quota plane.
	if _, err := r.quota.kube.CoreV1().ServiceAccounts(r.saNS).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: r.saName}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(r.bin, "webhook", "print-rbac", "--cluster-name", r.member.name, "--service-account", r.saNS+"/"+r.saName).Output()
	if err != nil {
		t.Fatalf("webhook print-rbac: %v", err)
	}
	applyYAML(t, r.quota.client, out)
	user, groups := quotatest.ServiceAccountUser(r.saNS, r.saName)
	quotatest.WaitBound(t, r.quota.kube, user, groups, "quotaplane-member-webhook", "")
	quotatest.WaitBound(t, r.quota.kube, user, groups, "quotaplane-member-cluster", members.Namespace(r.member.name))
	quotatest.WaitAllowed(t, []kubernetes.Interface{r.quota.kube}, user, groups, r.mintAttributes())
	anchor, err := r.quota.kube.CoreV1().Secrets(r.saNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.anchor}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tr, err := r.quota.kube.CoreV1().ServiceAccounts(r.saNS).CreateToken(ctx, r.saName, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		ExpirationSeconds: ptr.To[int64](3600),
		BoundObjectRef:    &authenticationv1.BoundObjectReference{APIVersion: "v1", Kind: "Secret", Name: anchor.Name, UID: anchor.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if r.original, err = credential.Parse(tr.Status.Token); err != nil {
		t.Fatal(err)
	}
	kubeconfig := tokenKubeconfig(t, r.quota, r.saName, tr.Status.Token)

	// The member: the kubeconfig Secret, as an operator makes it from the
	// file, and the webhook keeping it.
	if err := r.member.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: kubeconfigSecretNS}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	raw, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	data, err := clientcmd.Write(*raw)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.member.kube.CoreV1().Secrets(kubeconfigSecretNS).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: r.secret},
		Data: map[string][]byte{credential.SecretKey: data}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	r.wh = startWebhookWith(t, quotatest.BuildHookedBinary(t), r.member, kubeconfig,
		"--quota-kubeconfig-secret", kubeconfigSecretNS+"/"+r.secret, "--quota-token-lifetime", "1h", "--quota-token-refresh-every", "1s")
	r.wh.register(t, r.quota, kubeconfigSecretNS, unchargedNamespace)
	mf := &quotatest.Fixture{T: t, C: r.member.client, NS: r.f.NS}
	mf.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"), r.memberSecret("probe"), r.secrets.Name, r.secrets.Generation)
	return r
}

func (r *rotation) memberSecret(name string) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.f.NS}}
}

// mintAttributes are the quota plane's question for the webhook minting
// its own token.
func (r *rotation) mintAttributes() *authorizationv1.ResourceAttributes {
	return &authorizationv1.ResourceAttributes{Verb: "create", Resource: "serviceaccounts", Subresource: "token", Namespace: r.saNS, Name: r.saName}
}

// saved is the token the member's kubeconfig Secret holds.
func (r *rotation) saved(ctx context.Context) (credential.Token, error) {
	s, err := r.member.kube.CoreV1().Secrets(kubeconfigSecretNS).Get(ctx, r.secret, metav1.GetOptions{})
	if err != nil {
		return credential.Token{}, err
	}
	cfg, err := clientcmd.Load(s.Data[credential.SecretKey])
	if err != nil {
		return credential.Token{}, err
	}
	for _, a := range cfg.AuthInfos {
		return credential.Parse(a.Token)
	}
	return credential.Token{}, errors.New("the kubeconfig has no user")
}

// waitSaved waits until the Secret holds a token expiring after after's.
func (r *rotation) waitSaved(t testing.TB, after credential.Token, timeout time.Duration) credential.Token {
	t.Helper()
	var got credential.Token
	eventually(t, timeout, "the kubeconfig Secret holds a fresher token", func(ctx context.Context) error {
		var err error
		if got, err = r.saved(ctx); err != nil {
			return err
		}
		if !got.Expires.After(after.Expires) {
			return fmt.Errorf("it holds the token issued %s, expiring %s", got.IssuedAt, got.Expires)
		}
		return nil
	})
	if got.Namespace != r.saNS || got.Name != r.saName {
		t.Fatalf("the saved token is of %s/%s; want %s/%s", got.Namespace, got.Name, r.saNS, r.saName)
	}
	return got
}

// authenticates says whether the quota plane takes token.
func (r *rotation) authenticates(ctx context.Context, token string) (bool, error) {
	tr, err := r.quota.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return tr.Status.Authenticated, nil
}

// metric is the value of the webhook's series named by line's start (name
// and labels), or -1 when it has none.
func (r *rotation) metric(ctx context.Context, series string) (float64, error) {
	hc := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", r.wh.port), nil)
	if err != nil {
		return 0, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	m := regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(series) + ` (\S+)$`).FindSubmatch(body)
	if m == nil {
		return -1, nil
	}
	return strconv.ParseFloat(string(m[1]), 64)
}

// dryRun creates a Secret in the member as a dry run: through the webhook
// and the quota plane, nothing stored or charged.
func (r *rotation) dryRun(ctx context.Context, name string) error {
	_, err := r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret(name), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
	return err
}

// A member webhook's token is replaced while 1,000 creates run: none is
// refused; the original token, made useless after the rotations, is not
// missed; a restart starts with the saved token; unbinding revokes.
func TestMemberCredentialRotation(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two quotaplane serve processes and a webhook refreshing its token every second (60 s); run without -short")
	}
	r := newRotation(t)
	ctx := context.Background()

	t.Run("1,000 creates while the token rotates: none refused", func(t *testing.T) {
		const batches, perBatch = 10, 100
		var mu sync.Mutex
		var refused []string
		last := r.original
		rotations := 0
		began := time.Now()
		for b := range batches {
			if b > 0 {
				// Each batch after a rotation the Secret shows: rotations
				// interleave with the creates, at least batches-1 of them.
				last = r.waitSaved(t, last, 30*time.Second)
				rotations++
			}
			if b == 3 {
				// Three rotations on: the original token is made useless.
				if err := r.quota.kube.CoreV1().Secrets(r.saNS).Delete(ctx, r.anchor, metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
				eventually(t, 30*time.Second, "the quota plane refuses the original token", func(ctx context.Context) error {
					ok, err := r.authenticates(ctx, r.original.Raw)
					if err == nil && ok {
						err = errors.New("it still authenticates")
					}
					return err
				})
			}
			quotatest.ForEach(t, perBatch, func(i int) error {
				_, err := r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret(fmt.Sprintf("c%d-%d", b, i)), metav1.CreateOptions{})
				if err != nil {
					mu.Lock()
					refused = append(refused, err.Error())
					mu.Unlock()
				}
				return nil
			})
		}
		took := time.Since(began)
		if len(refused) > 0 {
			t.Fatalf("%d of %d creates refused while the token rotated; the first: %s\nwebhook:\n%s", len(refused), batches*perBatch, refused[0], r.wh.stderr.Tail())
		}
		if !last.IssuedAt.After(r.original.IssuedAt) || rotations < 2 {
			t.Fatalf("%d rotations seen, the last token issued %s, the original %s", rotations, last.IssuedAt, r.original.IssuedAt)
		}
		refreshed, err := r.metric(ctx, fmt.Sprintf(`milo_quota_webhook_credential_refreshes_total{cluster=%q,result="refreshed"}`, r.member.name))
		if err != nil {
			t.Fatal(err)
		}
		if refreshed < float64(rotations) {
			t.Errorf("the webhook counts %v refreshes; the Secret showed %d", refreshed, rotations)
		}
		t.Logf("%d creates admitted in %s across %d rotations seen in the Secret (%v refreshes counted); the original token was refused from batch 4 on",
			batches*perBatch, took.Round(time.Millisecond), rotations, refreshed)
		if counts := r.storedSecrets(t); counts[0] != batches*perBatch {
			t.Errorf("the member stores %d Secrets; want %d", counts[0], batches*perBatch)
		}
		r.waitAllocated(t, "secrets", batches*perBatch)
	})

	t.Run("a restart after the original token was invalidated starts with the saved one", func(t *testing.T) {
		r.wh.stop()
		if ok, err := r.authenticates(ctx, r.original.Raw); err != nil || ok {
			t.Fatalf("the original token: authenticated %t (%v); want refused", ok, err)
		}
		// Control: without the Secret, the file's dead token cannot start.
		control := &proc{name: "webhook without its Secret", bin: r.wh.bin,
			args: append(append([]string{}, r.wh.args[:len(r.wh.args)-6]...), "--quota-sync-timeout", "5s")}
		control.start(t, false)
		select {
		case <-control.exited:
		case <-time.After(time.Minute):
			t.Fatalf("the webhook with the original token only did not exit within a minute:\n%s", control.stderr.Tail())
		}
		if out := control.stderr.String(); !strings.Contains(out, "the server has asked for the client to provide credentials") {
			t.Errorf("the webhook with the original token only did not say it was refused:\n%s", control.stderr.Tail())
		}
		r.wh.restart(t)
		if _, err := r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret("after-restart"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a create after the restart: %v\nwebhook:\n%s", err, r.wh.stderr.Tail())
		}
	})

	t.Run("unbinding revokes: refresh fails, then creates fail closed; rebinding restores", func(t *testing.T) {
		user, groups := quotatest.ServiceAccountUser(r.saNS, r.saName)
		token := setup.TokenRoleName(r.member.name)
		mint := &rbacv1.RoleBinding{}
		if err := r.quota.client.Get(ctx, client.ObjectKey{Namespace: r.saNS, Name: token}, mint); err != nil {
			t.Fatal(err)
		}
		failedSeries := fmt.Sprintf(`milo_quota_webhook_credential_refreshes_total{cluster=%q,result="failed"}`, r.member.name)
		if err := r.quota.client.Delete(ctx, mint); err != nil {
			t.Fatal(err)
		}
		eventually(t, 60*time.Second, "the webhook counts a failed refresh", func(ctx context.Context) error {
			n, err := r.metric(ctx, failedSeries)
			if err == nil && n < 1 {
				err = fmt.Errorf("failed refreshes: %v", n)
			}
			return err
		})
		if !strings.Contains(r.wh.stderr.String(), "Refreshing the quota plane credential failed") {
			t.Errorf("the webhook did not log the failed refresh:\n%s", r.wh.stderr.Tail())
		}
		left, err := r.metric(ctx, fmt.Sprintf(`milo_quota_webhook_credential_expiry_seconds{cluster=%q}`, r.member.name))
		if err != nil || left < 1800 {
			t.Errorf("expiry gauge %v (%v); want the hour-long token's remaining seconds", left, err)
		}
		// The token in use is kept: creates are still decided.
		if _, err := r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret("while-unbound"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a create while the webhook may not mint: %v", err)
		}
		held, err := r.saved(ctx)
		if err != nil {
			t.Fatal(err)
		}
		mint.ResourceVersion, mint.UID = "", ""
		if err := r.quota.client.Create(ctx, mint); err != nil {
			t.Fatal(err)
		}
		quotatest.WaitAllowed(t, []kubernetes.Interface{r.quota.kube}, user, groups, r.mintAttributes())
		r.waitSaved(t, held, 90*time.Second) // within the backoff (at most 64 s)

		// Unbinding the webhook from its cluster: creates refused, saying why.
		speak := &rbacv1.RoleBinding{}
		clusterNS := members.Namespace(r.member.name)
		if err := r.quota.client.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "quotaplane-member-" + r.member.name}, speak); err != nil {
			t.Fatal(err)
		}
		if err := r.quota.client.Delete(ctx, speak); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, "a dry run is refused once the webhook is unbound", func(ctx context.Context) error {
			if err := r.dryRun(ctx, "unbound-probe"); err == nil {
				return errors.New("admitted")
			}
			return nil
		})
		_, err = r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret("unbound"), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "quota plane is unavailable") || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "quotaplane-member-cluster") {
			t.Fatalf("a create while the webhook is unbound: %v; want refused as unavailable, the quota plane's 403 naming quotaplane-member-cluster", err)
		}
		speak.ResourceVersion, speak.UID = "", ""
		if err := r.quota.client.Create(ctx, speak); err != nil {
			t.Fatal(err)
		}
		quotatest.WaitBound(t, r.quota.kube, user, groups, "quotaplane-member-cluster", clusterNS)
		eventually(t, 30*time.Second, "a dry run is admitted once the webhook is bound again", func(ctx context.Context) error {
			return r.dryRun(ctx, "rebound-probe")
		})
		if _, err := r.member.kube.CoreV1().Secrets(r.f.NS).Create(ctx, r.memberSecret("rebound"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a create once the webhook is bound again: %v", err)
		}
	})
}

// applyYAML creates the objects of a YAML stream in c.
func applyYAML(t testing.TB, c client.Client, data []byte) {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return
		} else if err != nil {
			t.Fatal(err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("creating %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}
