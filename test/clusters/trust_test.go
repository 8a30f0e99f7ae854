package clusters

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// postReview posts a review to the quota plane's review path of cluster
// with the credential in kubeconfig, as a webhook would; it returns the
// HTTP status, the answer (nil unless 200) and the body.
func postReview(t testing.TB, kubeconfig, cluster string, req *admissionv1.AdmissionRequest) (int, *admissionv1.AdmissionResponse, string) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hc.Timeout = 20 * time.Second
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Post(strings.TrimSuffix(cfg.Host, "/")+members.ReviewPath(cluster), "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, nil, string(data)
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, out); err != nil || out.Response == nil {
		t.Fatalf("the review path answered 200 with no AdmissionReview: %v\n%s", err, data)
	}
	return resp.StatusCode, out.Response, string(data)
}

// secretReview is the review of a create of Secret name in the fixture's
// namespace by requester.
func (w *world) secretReview(name string, requester authenticationv1.UserInfo) *admissionv1.AdmissionRequest {
	return &admissionv1.AdmissionRequest{UID: types.UID("review-" + name), Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: w.f.NS, Name: name, Operation: admissionv1.Create,
		UserInfo: requester,
		Object:   runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":%q,"namespace":%q,"uid":"uid-%s"}}`, name, w.f.NS, name))}}
}

// claimsNaming are the quota plane's claims of objects named name.
func (w *world) claimsNaming(ctx context.Context, name string) ([]string, error) {
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.quota.client.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for _, c := range list.Items {
		if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Name == name {
			out = append(out, c.Namespace+"/"+c.Name+" ("+c.Labels[members.Label]+")")
		}
	}
	return out, nil
}

// expectNothingCharged checks, a moment after the reviews, that no claim
// names any of the reviews' objects.
func (w *world) expectNothingCharged(t *testing.T, names ...string) {
	t.Helper()
	time.Sleep(time.Second) // a granted create's claim is written at once
	for _, n := range names {
		got, err := w.claimsNaming(context.Background(), n)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) > 0 {
			t.Errorf("Secret %s was charged: claims %v", n, got)
		}
	}
}

// testReviewPathTrust attacks the review path with a webhook's credential:
// another cluster's path, and requesters the quota plane must not believe.
func (w *world) testReviewPathTrust(t *testing.T) {
	east, west := w.webhooks[0], w.webhooks[1]
	allowed := authenticationv1.UserInfo{Username: west.member.name + ":quotaplane-admin"}
	t.Run("east's credential posting west's reviews is refused", func(t *testing.T) {
		code, resp, body := postReview(t, east.quotaKubeconfig, west.member.name, w.secretReview("cross-cluster", allowed))
		if code != http.StatusForbidden || !strings.Contains(body, `"review"`) || !strings.Contains(body, members.Namespace(west.member.name)) {
			t.Errorf("east's credential posting to west's path: %d %+v %s; want 403 naming verb review and namespace %s", code, resp, body, members.Namespace(west.member.name))
		}
		w.expectNothingCharged(t, "cross-cluster")
	})
	t.Run("east's credential speaks for east's requesters only as they are", func(t *testing.T) {
		forged := map[string]authenticationv1.UserInfo{
			"in-masters": {Username: "mallory", Groups: []string{"system:masters"}},
			"existing":   {Username: "mallory", Extra: map[string]authenticationv1.ExtraValue{members.ExistingObjectExtra: {"true"}}},
			// The quota plane's own service account tenants/bob may charge
			// the organization (testMemberIdentities binds it).
			"system-user": {Username: "system:serviceaccount:tenants:bob", Groups: []string{"system:serviceaccounts", "system:authenticated"}},
		}
		for name, requester := range forged {
			code, resp, body := postReview(t, east.quotaKubeconfig, east.member.name, w.secretReview("forged-"+name, requester))
			if code != http.StatusOK || resp.Allowed {
				t.Errorf("requester %+v posted with east's credential: %d %+v; want a refusal", requester, code, body)
			}
		}
		w.expectNothingCharged(t, "forged-in-masters", "forged-existing", "forged-system-user")
	})
	t.Run("every name in east's reviews is east's, whatever the poster sends", func(t *testing.T) {
		w.testNamesAreTheClusters(t, east)
	})
}

// testNamesAreTheClusters posts raw reviews with cluster east's webhook
// credential (quotaplane webhook bypassed): requesters named as quota-plane
// identities allowed to charge the organization — a user, a user of east's
// names in an allowed group, with and without the webhook's mark — are
// each taken as one of east's names and refused; nothing is charged. As a
// control, east's own administrator, as an earlier webhook names it
// (east:quotaplane-admin) and as this one does (quotaplane-admin with the
// mark), is allowed: both name the same person.
func (w *world) testNamesAreTheClusters(t *testing.T, east *webhook) {
	w.allowClaims(t, "carol")
	group := "bob-admins-" + w.f.ID
	w.allowGroupClaims(t, group)
	mark := map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: {members.IdentitiesMember}}
	forged := map[string]struct {
		requester authenticationv1.UserInfo
		as        string
	}{
		"carol":                      {authenticationv1.UserInfo{Username: "carol"}, "east:carol"},
		"carol-marked":               {authenticationv1.UserInfo{Username: "carol", Extra: mark}, "east:carol"},
		"mallory-in-bob-admins":      {authenticationv1.UserInfo{Username: "east:mallory", Groups: []string{group}}, "east:mallory"},
		"mallory-in-bob-admins-mark": {authenticationv1.UserInfo{Username: "mallory", Groups: []string{group}, Extra: mark}, "east:mallory"},
		"carol-as-already-mapped":    {authenticationv1.UserInfo{Username: "carol", Groups: []string{group}, Extra: map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: {"mapped"}}}, "east:carol"},
		"west-name-on-east-path":     {authenticationv1.UserInfo{Username: "west:quotaplane-admin"}, "east:west:quotaplane-admin"},
	}
	var names []string
	for name, tc := range forged {
		for _, dryRun := range []bool{true, false} {
			req := w.secretReview("names-"+name, tc.requester)
			req.DryRun = &dryRun
			code, resp, body := postReview(t, east.quotaKubeconfig, east.member.name, req)
			if code != http.StatusOK || resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, fmt.Sprintf("%q may not charge quota", tc.as)) {
				t.Errorf("requester %+v (dry run %t) posted with east's credential: %d %s; want refused as %s", tc.requester, dryRun, code, body, tc.as)
			}
		}
		names = append(names, "names-"+name)
	}
	w.expectNothingCharged(t, names...)
	for name, requester := range map[string]authenticationv1.UserInfo{
		"as an earlier webhook names it": {Username: "east:quotaplane-admin"},
		"as this webhook names it":       {Username: "quotaplane-admin", Extra: mark},
	} {
		req := w.secretReview("names-control", requester)
		dryRun := true
		req.DryRun = &dryRun
		if code, resp, body := postReview(t, east.quotaKubeconfig, east.member.name, req); code != http.StatusOK || !resp.Allowed {
			t.Errorf("east's administrator %s (%+v), a dry run: %d %s; want allowed", name, requester, code, body)
		}
	}
}

// allowGroupClaims lets group charge the fixture's organization in the
// quota plane.
func (w *world) allowGroupClaims(t testing.TB, group string) {
	t.Helper()
	ctx := context.Background()
	name := "claim-group-" + group
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{w.f.Org.APIGroup}, Resources: []string{"organizations"}, Verbs: []string{"claim"}, ResourceNames: []string{w.f.Org.Name}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, APIGroup: rbacv1.GroupName, Name: group}}}
	for _, o := range []client.Object{role, binding} {
		if err := w.quota.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	quotatest.WaitAllowed(t, []kubernetes.Interface{w.quota.kube}, "a-member-of-"+group, []string{group}, w.claimAttributes())
}

// testMemberIdentities: a member's service account is not the quota plane's
// service account of the same name, with the webhook's default prefixes.
func (w *world) testMemberIdentities(t *testing.T) {
	ctx := context.Background()
	east := w.members[0]
	bob := "system:serviceaccount:tenants:bob"
	// In the quota plane, tenants/bob may charge the organization.
	if err := w.quota.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	writer := "secrets-writer-" + w.f.ID
	for _, c := range []*cluster{w.quota, east} {
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: writer}, Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "get", "delete"}}}}
		if err := c.client.Create(ctx, role); err != nil {
			t.Fatal(err)
		}
	}
	tok, _ := quotatest.ServiceAccountToken(t, w.quota.config, "tenants", "bob", writer, w.f.NS)
	w.allowClaims(t, bob)
	cfg := rest.AnonymousClientConfig(w.quota.config)
	cfg.BearerToken = tok
	if err := quotatest.NewClient(t, cfg).Create(ctx, w.secret("quota-plane-bob")); err != nil {
		t.Fatalf("the quota plane's own tenants/bob charging the organization: %v", err)
	}
	// In east, a service account of the same name exists only there.
	if err := east.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "tenants"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	memberTok, _ := quotatest.ServiceAccountToken(t, east.config, "tenants", "bob", writer, w.f.NS)
	// What east's API server says of the token is what it sends a webhook.
	tr, err := east.kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: memberTok}}, metav1.CreateOptions{})
	if err != nil || !tr.Status.Authenticated {
		t.Fatalf("east's token of tenants/bob: %v %+v", err, tr.Status)
	}
	// A webhook of east started with the default prefixes.
	wh := startWebhook(t, w.bin, w.quota, east, "")
	defer wh.stop()
	resp := wh.review(t, w.secretReview("member-bob", tr.Status.User))
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, `"east:`+bob+`" may not charge quota`) {
		t.Errorf("east's own tenants/bob charging the quota plane's organization: %+v; want refused as east:%s", resp.Result, bob)
	}
	w.expectNothingCharged(t, "member-bob")
	if err := w.quota.client.Delete(ctx, w.secret("quota-plane-bob")); err != nil {
		t.Fatal(err)
	}
	w.waitAllocated(t, "secrets", 0)
}

// applyExample creates the objects of one examples/ file in c.
func applyExample(t testing.TB, c client.Client, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(quotatest.ModuleRoot(), "examples", file))
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err == io.EOF {
			return out
		} else if err != nil {
			t.Fatalf("examples/%s: %v", file, err)
		}
		if len(u.Object) == 0 {
			continue
		}
		if err := c.Create(context.Background(), u); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("examples/%s: creating %s %s: %v", file, u.GetKind(), u.GetName(), err)
		}
		out = append(out, u)
	}
}

// memberPod is a Pod of the workloads example's namespace: 100m and 64Mi
// requested, so that 3 pods are the limit that binds.
func memberPod(name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "example", Resources: corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}}}}}}
}

// memberPodClaims are the quota plane's claims of cluster's Pods, by name:
// namespace/name@uid.
func (w *world) memberPodClaims(ctx context.Context, cluster string) (map[string]string, error) {
	list := &quotav1alpha1.ResourceClaimList{}
	if err := w.quota.client.List(ctx, list, client.MatchingLabels{members.Label: cluster}); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, c := range list.Items {
		if c.Spec.ResourceRef != nil && c.Spec.ResourceRef.Kind == "Pod" && c.DeletionTimestamp == nil {
			out[c.Spec.ResourceRef.Name] = c.Namespace + "/" + c.Name + "@" + string(c.UID)
		}
	}
	return out, nil
}

// testWorkloadsPolicy runs the shipped examples/workloads Pod policy (a
// Namespace consumer; the claim in the Pod's namespace) for member Pods.
func (w *world) testWorkloadsPolicy(t *testing.T) {
	ctx := context.Background()
	east, west := w.members[0], w.members[1]
	for _, f := range []string{"workloads/00-namespaces.yaml", "workloads/10-registrations.yaml", "workloads/20-policies.yaml", "workloads/30-quota.yaml"} {
		applyExample(t, w.quota.client, f)
	}
	// The members' administrators may charge Namespace team-a.
	name := "claim-team-a-" + w.f.ID
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"claim"}, ResourceNames: []string{"team-a"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}}
	for _, m := range w.members {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: m.name + ":quotaplane-admin"})
	}
	for _, o := range []client.Object{role, binding} {
		if err := w.quota.client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range binding.Subjects {
		quotatest.WaitAllowed(t, []kubernetes.Interface{w.quota.kube}, s.Name, nil,
			&authorizationv1.ResourceAttributes{Verb: "claim", Resource: "namespaces", Name: "team-a"})
	}
	policy := &quotav1alpha1.ClaimCreationPolicy{ObjectMeta: metav1.ObjectMeta{Name: "pods-charge-their-namespace"}}
	f := *w.f
	f.T = t
	f.WaitPolicyReady(policy, metav1.ConditionTrue, memberPod("in-force-probe"))
	pods := corev1.SchemeGroupVersion.WithResource("pods")
	for i, m := range w.members {
		if err := m.client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
			t.Fatal(err)
		}
		w.webhooks[i].register(t, w.quota, "quotaplane-system", unchargedNamespace)
		mf := &quotatest.Fixture{T: t, C: m.client, NS: "team-a"}
		mf.WaitPolicyInForce(pods, memberPod("probe"), policy.Name, policy.Generation)
	}

	admitted := 0
	for i := range 5 {
		_, err := east.kube.CoreV1().Pods("team-a").Create(ctx, memberPod(fmt.Sprintf("p%d", i)), metav1.CreateOptions{})
		switch {
		case err == nil:
			admitted++
		case !isQuotaRefusal(err):
			t.Fatalf("Pod p%d in east: %v", i, err)
		}
	}
	if admitted != 3 {
		t.Fatalf("%d of 5 Pods admitted in east against a limit of 3 pods in Namespace team-a", admitted)
	}
	first, err := w.memberPodClaims(ctx, east.name)
	if err != nil {
		t.Fatal(err)
	}
	// Two reconcile periods (2 s) after the charge-after (1 s): the claims
	// are the same claims, none released, none charged late.
	time.Sleep(6 * time.Second)
	again, err := w.memberPodClaims(ctx, east.name)
	if err != nil {
		t.Fatal(err)
	}
	if len(first) != 3 || fmt.Sprint(first) != fmt.Sprint(again) {
		t.Errorf("east's Pod claims changed across two reconcile periods:\nbefore %v\nafter  %v", first, again)
	}
	late, err := east.kube.CoreV1().Events("team-a").List(ctx, metav1.ListOptions{FieldSelector: "reason=QuotaChargedLate"})
	if err != nil {
		t.Fatal(err)
	}
	if len(late.Items) > 0 {
		t.Errorf("%d QuotaChargedLate Events for Pods the webhook decided, the first: %s", len(late.Items), late.Items[0].Message)
	}

	// West's Pod of the same name as one of east's is its own claim.
	if err := east.kube.CoreV1().Pods("team-a").Delete(ctx, "p2", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "east's p2 released", func(ctx context.Context) error {
		c, err := w.memberPodClaims(ctx, east.name)
		if err == nil && len(c) != 2 {
			err = fmt.Errorf("east's Pod claims: %v", c)
		}
		return err
	})
	if _, err := west.kube.CoreV1().Pods("team-a").Create(ctx, memberPod("p0"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("Pod p0 in west, with 2 of 3 pods used: %v", err)
	}
	eventually(t, 30*time.Second, "east's and west's p0 claimed apart", func(ctx context.Context) error {
		e, err := w.memberPodClaims(ctx, east.name)
		if err != nil {
			return err
		}
		wc, err := w.memberPodClaims(ctx, west.name)
		if err != nil {
			return err
		}
		if e["p0"] == "" || wc["p0"] == "" || strings.Split(e["p0"], "@")[0] == strings.Split(wc["p0"], "@")[0] {
			return fmt.Errorf("east's p0: %q, west's p0: %q", e["p0"], wc["p0"])
		}
		return nil
	})
	_, err = west.kube.CoreV1().Pods("team-a").Create(ctx, memberPod("p9"), metav1.CreateOptions{})
	if !isQuotaRefusal(err) {
		t.Errorf("a fourth Pod over both members: %v; want the quota refusal", err)
	}
	// Free the namespace's pods for what follows.
	for _, m := range w.members {
		if err := m.kube.CoreV1().Pods("team-a").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
