package review

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// reviewer is a user who may review and read and write ConfigMaps, reached
// by impersonation.
func (w *world) reviewer(name string) *rest.Config {
	w.t.Helper()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{quotav1alpha1.GroupName}, Resources: []string{"quotareviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create", "patch"}}}}
	w.create(role)
	w.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: name}}})
	// RBAC authorizes from a cache: the reviewer acts once it has the binding.
	quotatest.WaitBound(w.t, w.kube, name, nil, name, "")
	cfg := rest.CopyConfig(srv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: name, Groups: []string{"system:authenticated"}}
	cfg.QPS, cfg.Burst = 500, 1000
	return cfg
}

// dispatched is how many requests API Priority and Fairness has dispatched
// through FlowSchema flowSchema.
func (w *world) dispatched(flowSchema string) float64 {
	w.t.Helper()
	raw, err := w.kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		w.t.Fatal(err)
	}
	sum := 0.0
	sc := bufio.NewScanner(bytes.NewReader(raw))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_flowcontrol_dispatched_requests_total{") || !strings.Contains(line, `flow_schema="`+flowSchema+`"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			w.t.Fatalf("metric line %q: %v", line, err)
		}
		sum += v
	}
	return sum
}

// TestAReviewsReadsAreItsRequestersLoad: the objects a review looks up are
// read as the reviewed user, in its flow of API Priority and Fairness —
// never as serve's exempt loopback identity. A FlowSchema of its own
// matches the reviewer; a review of 12 ConfigMaps that exist, one in each
// of 12 namespaces, dispatches the review and the 12 reads through it.
func TestAReviewsReadsAreItsRequestersLoad(t *testing.T) {
	w := newWorld(t, "web")
	ctx := context.Background()
	name := uniq("reviewer")
	cfg := w.reviewer(name)
	fs := &flowcontrolv1.FlowSchema{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: flowcontrolv1.FlowSchemaSpec{
		PriorityLevelConfiguration: flowcontrolv1.PriorityLevelConfigurationReference{Name: "workload-low"},
		MatchingPrecedence:         500, DistinguisherMethod: &flowcontrolv1.FlowDistinguisherMethod{Type: flowcontrolv1.FlowDistinguisherMethodByUserType},
		Rules: []flowcontrolv1.PolicyRulesWithSubjects{{
			Subjects: []flowcontrolv1.Subject{{Kind: flowcontrolv1.SubjectKindUser, User: &flowcontrolv1.UserSubject{Name: name}}},
			ResourceRules: []flowcontrolv1.ResourcePolicyRule{{Verbs: []string{"*"}, APIGroups: []string{"*"}, Resources: []string{"*"},
				ClusterScope: true, Namespaces: []string{"*"}}}}}}}
	if _, err := w.kube.FlowcontrolV1().FlowSchemas().Create(ctx, fs, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for i := range 12 {
		ns := fmt.Sprintf("%s-%d", w.ns, i)
		w.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: ns},
			Data: map[string]string{"a": "b"}}
		w.create(cm.DeepCopy())
		objs = append(objs, cm)
	}
	reviewer := quotatest.NewClient(t, cfg)
	// Until the FlowSchema and the binding are in force: the reviewer's own
	// reads are dispatched through the FlowSchema.
	w.poll("the reviewer's FlowSchema and binding in force", func() bool {
		before := w.dispatched(name)
		return reviewer.Get(ctx, client.ObjectKeyFromObject(objs[0]), &corev1.ConfigMap{}) == nil && w.dispatched(name) > before
	})
	before := w.dispatched(name)
	r := reviewOf(t, objs...)
	if err := reviewer.Create(ctx, r); err != nil {
		t.Fatalf("the review: %v", err)
	}
	for _, o := range r.Status.Objects {
		if o.Operation != "Update" {
			t.Errorf("object %d (%s/%s) was reviewed as %q; it exists, so as an Update", o.Index, o.Namespace, o.Name, o.Operation)
		}
	}
	if got := w.dispatched(name) - before; got < float64(len(objs)+1) {
		t.Fatalf("the reviewer's FlowSchema dispatched %v requests for the review of %d existing objects in %d namespaces; want the review and its %d reads (at least %d): the reads went around the reviewer's flow",
			got, len(objs), len(objs), len(objs), len(objs)+1)
	}
}

// TestReviewsPerRequesterAreBounded: a requester has at most
// quotareview.PerUser reviews answered at once; the next is refused 429
// with Retry-After, saying the bound and what to do, and the others are
// answered. Eight reviews of 1,000 objects are posted at once (and again,
// up to five rounds, until they overlap).
func TestReviewsPerRequesterAreBounded(t *testing.T) {
	w := newWorld(t, "web")
	cfg := w.reviewer(uniq("busy-reviewer"))
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var objs []client.Object
	for i := range quotav1alpha1.MaxReviewObjects {
		objs = append(objs, w.configMap(fmt.Sprintf("cm-%d", i), w.projects[0], 1))
	}
	body, err := json.Marshal(reviewOf(t, objs...))
	if err != nil {
		t.Fatal(err)
	}
	url := strings.TrimSuffix(cfg.Host, "/") + "/apis/quota.miloapis.com/v1alpha1/quotareviews"
	post := func() (int, string, string) {
		req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = resp.Body.Close() }()
		msg, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header.Get("Retry-After"), string(msg)
	}
	var refused []string
	shed := 0
	for round := 0; round < 5 && len(refused) == 0; round++ {
		var mu sync.Mutex
		var wg sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				code, retry, msg := post()
				mu.Lock()
				defer mu.Unlock()
				switch {
				case code == http.StatusCreated:
				case code == http.StatusTooManyRequests && strings.Contains(msg, "reviews answered at once"):
					if retry != "1" {
						t.Errorf("a review over the bound: 429 with Retry-After %q, %s; want Retry-After 1", retry, msg)
					}
					refused = append(refused, msg)
				case shedByTheServer(code, msg):
					// On a loaded machine API Priority and Fairness may
					// shed the POST or the review's own reads (which run
					// in the requester's flow): load the server refused,
					// not the bound this test is about.
					shed++
				default:
					t.Errorf("a review: %d %s", code, msg)
				}
			}()
		}
		close(start)
		wg.Wait()
	}
	if len(refused) == 0 {
		t.Fatalf("five rounds of eight reviews at once by one requester: none refused for the bound (%d shed by the server's load); want the ones over the bound refused 429", shed)
	}
	if shed > 0 {
		t.Logf("%d reviews were shed by the server's load (API Priority and Fairness), %d refused for the bound", shed, len(refused))
	}
}

// shedByTheServer reports whether a review's answer is the server shedding
// load: API Priority and Fairness' own 429, or a 503 saying the review's
// reads were refused so (nothing was taken, the client retries).
func shedByTheServer(code int, msg string) bool {
	switch code {
	case http.StatusTooManyRequests:
		return strings.Contains(strings.ToLower(msg), "too many requests")
	case http.StatusServiceUnavailable:
		return strings.Contains(msg, "the review names") && strings.Contains(strings.ToLower(msg), "too many requests")
	}
	return false
}
