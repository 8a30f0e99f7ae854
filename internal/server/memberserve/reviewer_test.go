package memberserve

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
)

func request(mutate func(*admissionv1.AdmissionRequest)) *admissionv1.AdmissionRequest {
	r := &admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Secret"},
		Resource: metav1.GroupVersionResource{Version: "v1", Resource: "secrets"}, Namespace: "ns", Name: "s", Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Secret","metadata":{"name":"s","namespace":"ns","uid":"1"}}`)}}
	if mutate != nil {
		mutate(r)
	}
	return r
}

// Bad reviews get a specific error and nothing is decided.
func TestAttributesRefuseBadReviews(t *testing.T) {
	for name, tc := range map[string]struct {
		mutate func(*admissionv1.AdmissionRequest)
		want   string
	}{
		"scale":         {func(r *admissionv1.AdmissionRequest) { r.SubResource = "scale" }, "sends scale updates as updates of the object"},
		"delete":        {func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Delete }, "only CREATE and UPDATE"},
		"no object":     {func(r *admissionv1.AdmissionRequest) { r.Object.Raw = nil }, "no request.object"},
		"kind mismatch": {func(r *admissionv1.AdmissionRequest) { r.Kind.Kind = "ConfigMap" }, "but request.kind says"},
		"update no old": {func(r *admissionv1.AdmissionRequest) { r.Operation = admissionv1.Update }, "no request.oldObject"},
		"not an object": {func(r *admissionv1.AdmissionRequest) { r.Object.Raw = []byte("[1]") }, "not a Kubernetes object"},
	} {
		t.Run(name, func(t *testing.T) {
			_, _, _, err := attributes("east", false, request(tc.mutate))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("attributes: %v; want %q", err, tc.want)
			}
		})
	}
	a, _, _, err := attributes("east", false, request(nil))
	if err != nil || a.GetName() != "s" || a.GetKind().Kind != "Secret" {
		t.Errorf("a good review: %v, %+v", err, a)
	}
}

// Before the plugin runs, reviews are refused as unavailable; paths and
// methods that are not reviews are refused with what to send.
func TestReviewerHTTP(t *testing.T) {
	r := &Reviewer{}
	if resp := r.Review(context.Background(), "east", request(nil)); resp.Allowed || resp.Result.Code != http.StatusServiceUnavailable {
		t.Errorf("without the plugin: %+v", resp)
	}
	for path, code := range map[string]int{"/quota/v1alpha1/clusters/Bad/review": http.StatusNotFound, "/quota/v1alpha1/clusters/east/review": http.StatusMethodNotAllowed} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if rec.Code != code {
			t.Errorf("GET %s: %d, want %d", path, rec.Code, code)
		}
	}
	post := func(u user.Info) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/quota/v1alpha1/clusters/east/review", strings.NewReader("{}"))
		if u != nil {
			req = req.WithContext(genericapirequest.WithUser(req.Context(), u))
		}
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, req)
		return rec
	}
	webhook := &user.DefaultInfo{Name: "webhook-east"}
	// Nobody, or a poster not allowed review on east, is refused before
	// the review is read.
	if rec := post(nil); rec.Code != http.StatusUnauthorized {
		t.Errorf("no user: %d %s", rec.Code, rec.Body.String())
	}
	r.Authorizer = &answer{decision: authorizer.DecisionDeny}
	if rec := post(webhook); rec.Code != http.StatusForbidden || !strings.Contains(rec.Body.String(), `may not post the reviews of member cluster east`) {
		t.Errorf("a poster without review on east: %d %s", rec.Code, rec.Body.String())
	}
	r.Authorizer = &answer{decision: authorizer.DecisionAllow}
	if rec := post(webhook); rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), "AdmissionReview") {
		t.Errorf("an empty review: %d %s", rec.Code, rec.Body.String())
	}
}
