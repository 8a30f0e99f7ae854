package memberserve

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/warning"

	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// maxReview bounds a review's body: an object of etcd's largest size and
// its old version, with room for the envelope.
const maxReview = 4 << 20

// Reviewer answers member clusters' AdmissionReviews with the server's
// ClaimCreationPolicy plugin. The zero value answers 503 until Use.
type Reviewer struct {
	plugin atomic.Pointer[charge.Charger]
	// Authorizer is the quota plane's (the root's): whoever posts a
	// cluster's review needs verb members.VerbReview on it. Set before the
	// server serves; nil refuses every review.
	Authorizer authorizer.Authorizer
	// Trusted are the member clusters whose identities the quota plane
	// takes as its own (serve's --trust-member-cluster-identities); every
	// other cluster's are mapped into its names (requester). Set before the
	// server serves.
	Trusted sets.Set[string]
}

// Use makes p the charging component reviews are charged by
// (claimpolicy.Register's created callback).
func (r *Reviewer) Use(p *charge.Charger) { r.plugin.Store(p) }

// objectInterfaces are what a review's validation is given: an empty
// scheme's (the plugin converts nothing).
func objectInterfaces() admission.ObjectInterfaces {
	return admission.NewObjectInterfacesFromScheme(runtime.NewScheme())
}

// ServeHTTP decides one review posted to ReviewPath(cluster). The request
// has passed the server's authentication and authorization (non-resource
// URL, verb post); the poster must also be allowed verb review on the
// cluster (members.Access) before anything is read or decided: only then
// does it speak for that cluster.
func (r *Reviewer) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if p, ok := planes.From(req.Context()); ok {
		// The review endpoint is the root's alone (planeserve.Outer answers
		// it 404 in planes); this holds should a plane's request reach it.
		http.Error(w, fmt.Sprintf("%s is not served in the control plane of %s %s: post reviews to the quota plane's root URL", req.URL.Path, p.OwnerKind(), p.Name), http.StatusNotFound)
		return
	}
	cluster, ok := members.ClusterOfPath(req.URL.Path)
	if !ok {
		http.Error(w, fmt.Sprintf("%s is no review path: post AdmissionReviews to %s<cluster>/review, where <cluster> is a DNS label", req.URL.Path, members.ReviewPrefix), http.StatusNotFound)
		return
	}
	if req.Method != http.MethodPost {
		http.Error(w, "post an admission.k8s.io/v1 AdmissionReview to this path", http.StatusMethodNotAllowed)
		return
	}
	poster, ok := genericapirequest.UserFrom(req.Context())
	if !ok {
		http.Error(w, "the request carries no authenticated user; post reviews with the credential of the cluster's webhook", http.StatusUnauthorized)
		return
	}
	if err := mayReview(req.Context(), r.Authorizer, poster, cluster); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	body, err := io.ReadAll(io.LimitReader(req.Body, maxReview+1))
	if err != nil || len(body) > maxReview {
		http.Error(w, fmt.Sprintf("reading the review: at most %d bytes are read (%v)", maxReview, err), http.StatusBadRequest)
		return
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("the body is no admission.k8s.io/v1 AdmissionReview with a request: %v", err), http.StatusBadRequest)
		return
	}
	resp := r.Review(req.Context(), cluster, review.Request)
	out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// Review decides one member cluster request and says what to answer it.
// The caller has authorized the poster (ServeHTTP).
func (r *Reviewer) Review(ctx context.Context, cluster string, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	resp := &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
	p := r.plugin.Load()
	if p == nil {
		return refuse(resp, apierrors.NewServiceUnavailable("the quota plane's ClaimCreationPolicy admission is not running (serve was started without its engine, or is starting); retry in a few seconds"))
	}
	attrs, existing, notes, err := attributes(cluster, r.Trusted.Has(cluster), req)
	if err != nil {
		return refuse(resp, apierrors.NewBadRequest(err.Error()))
	}
	warnings := &recorder{msgs: notes}
	ctx = warning.WithWarningRecorder(members.WithCluster(ctx, cluster), warnings)
	ctx = genericapirequest.WithRequestInfo(ctx, requestInfo(req))
	mode := charge.Admit
	if existing {
		mode = charge.Existing
	}
	// The member cluster stores the object or not; this server cannot
	// tell. The claim is written now, and the cluster's webhook releases
	// it should the object never appear there (docs/clusters.md).
	charged, err := p.Charge(ctx, charge.Request{Attributes: attrs, Objects: objectInterfaces(), Mode: mode, StoredElsewhere: true})
	resp.Warnings = warnings.list()
	resp.AuditAnnotations = attrs.annotations()
	if err == nil && !attrs.IsDryRun() {
		if resp.AuditAnnotations == nil {
			resp.AuditAnnotations = map[string]string{}
		}
		resp.AuditAnnotations[members.ChargedAnnotation] = strconv.FormatBool(charged.Charged)
	}
	if err != nil {
		return refuse(resp, err)
	}
	return resp
}

func refuse(resp *admissionv1.AdmissionResponse, err error) *admissionv1.AdmissionResponse {
	resp.Allowed = false
	var st apierrors.APIStatus = apierrors.NewInternalError(err)
	if s, ok := err.(apierrors.APIStatus); ok {
		st = s
	}
	status := st.Status()
	resp.Result = &status
	return resp
}

// attributes are the admission attributes of a member cluster's request,
// its requester as the quota plane takes it (requester), whether it is the
// webhook's review of an existing object, and why a requester was taken as
// nobody. Scale updates arrive as updates of the scaled object (the webhook
// reads it in its cluster): this server cannot read it.
func attributes(cluster string, trusted bool, req *admissionv1.AdmissionRequest) (*memberAttributes, bool, []string, error) {
	if req.SubResource != "" {
		return nil, false, nil, fmt.Errorf("cluster %s sent a review of subresource %q of %s; quotaplane webhook sends scale updates as updates of the object they scale, and no other subresource is charged: update the webhook to this server's version", cluster, req.SubResource, req.Resource.Resource)
	}
	var op admission.Operation
	switch req.Operation {
	case admissionv1.Create:
		op = admission.Create
	case admissionv1.Update:
		op = admission.Update
	default:
		return nil, false, nil, fmt.Errorf("operation %s is not charged; only CREATE and UPDATE are reviewed", req.Operation)
	}
	gvk := schema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind}
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	obj, err := decode(req.Object.Raw, gvk, "object")
	if err != nil {
		return nil, false, nil, err
	}
	var old runtime.Object
	if op == admission.Update {
		if old, err = decode(req.OldObject.Raw, gvk, "oldObject"); err != nil {
			return nil, false, nil, err
		}
	}
	dryRun := req.DryRun != nil && *req.DryRun
	u, existing, notes := requester(cluster, trusted, req.Operation, req.UserInfo)
	a := &memberAttributes{Attributes: admission.NewAttributesRecord(obj, old, gvk, req.Namespace, req.Name, gvr, "", op, nil, dryRun, u)}
	return a, existing, notes, nil
}

func decode(raw []byte, gvk schema.GroupVersionKind, field string) (runtime.Object, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("the review has no request.%s", field)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("request.%s is not a Kubernetes object: %v", field, err)
	}
	if u.GroupVersionKind() != gvk {
		return nil, fmt.Errorf("request.%s is a %s, but request.kind says %s", field, u.GroupVersionKind(), gvk)
	}
	return u, nil
}

// requestInfo is what policies read as the request: the member's request,
// not the review's post.
func requestInfo(req *admissionv1.AdmissionRequest) *genericapirequest.RequestInfo {
	verb := strings.ToLower(string(req.Operation))
	parts := []string{req.Resource.Resource}
	if req.Name != "" {
		parts = append(parts, req.Name)
	}
	return &genericapirequest.RequestInfo{IsResourceRequest: true, Verb: verb, APIGroup: req.Resource.Group, APIVersion: req.Resource.Version,
		Namespace: req.Namespace, Resource: req.Resource.Resource, Name: req.Name, Parts: parts}
}

// memberAttributes keep the audit annotations a plugin adds, for the
// response.
type memberAttributes struct {
	admission.Attributes
	mu  sync.Mutex
	ann map[string]string
}

func (a *memberAttributes) AddAnnotation(k, v string) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ann == nil {
		a.ann = map[string]string{}
	}
	a.ann[k] = v
	return nil
}

func (a *memberAttributes) AddAnnotationWithLevel(k, v string, _ auditinternal.Level) error {
	return a.AddAnnotation(k, v)
}

func (a *memberAttributes) annotations() map[string]string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.ann
}

// recorder keeps the warnings a plugin adds, for the response.
type recorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *recorder) AddWarning(_, text string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, text)
}

func (r *recorder) list() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs
}
