package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/klog/v2"

	"github.com/quotaplane/quotaplane/internal/kinds"
	"github.com/quotaplane/quotaplane/internal/members"
)

// maxBody bounds an AdmissionReview read from the member's API server.
const maxBody = 4 << 20

// serveValidate answers one AdmissionReview of the member's API server.
func (w *Webhook) serveValidate(rw http.ResponseWriter, req *http.Request) {
	began := time.Now()
	body, err := io.ReadAll(io.LimitReader(req.Body, maxBody+1))
	review := &admissionv1.AdmissionReview{}
	if err == nil && len(body) <= maxBody {
		err = json.Unmarshal(body, review)
	}
	if err != nil || review.Request == nil {
		http.Error(rw, fmt.Sprintf("expected an admission.k8s.io/v1 AdmissionReview with a request (%v)", err), http.StatusBadRequest)
		return
	}
	resp, result := w.review(req.Context(), review.Request)
	resp.UID = review.Request.UID
	w.metrics.reviewed(result, time.Since(began))
	out := admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Response: resp}
	rw.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(rw).Encode(out)
}

// Results of a review, for the metrics.
const (
	resultNotGoverned = "not_governed"
	resultAllowed     = "allowed"
	resultDenied      = "denied"
	resultUnavailable = "unavailable"
	resultFailOpen    = "fail_open"
	resultError       = "error"
)

// review decides one request: not governed, allowed at once; otherwise the
// quota plane decides.
func (w *Webhook) review(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, string) {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return allow, resultNotGoverned
	}
	if req.SubResource != "" && req.SubResource != "scale" {
		return allow, resultNotGoverned // status and the like are never charged
	}
	fwd := req.DeepCopy()
	if req.SubResource == "scale" {
		kind, ok := w.kindOf(schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource})
		if !ok || len(w.policies.governing(kind)) == 0 {
			return allow, resultNotGoverned
		}
		if err := w.asUpdate(ctx, fwd, kind); err != nil {
			return deny(apierrors.NewInternalError(err)), resultError
		}
	}
	kind := schema.GroupVersionKind{Group: fwd.Kind.Group, Version: fwd.Kind.Version, Kind: fwd.Kind.Kind}
	governing := w.policies.governing(kind)
	if len(governing) == 0 {
		return allow, resultNotGoverned
	}
	fwd.UserInfo = w.mapUser(req.UserInfo)
	resp, err := w.forward(ctx, fwd)
	if err == nil {
		if resp.Allowed {
			if req.DryRun == nil || !*req.DryRun {
				w.watchKind(kind)
			}
			return resp, resultAllowed
		}
		return resp, resultDenied
	}
	if allIgnore(governing) {
		msg := fmt.Sprintf("%s %s was admitted WITHOUT quota (fail-open): the quota plane could not decide it (%v) and every policy governing it, %s, has failurePolicy: Ignore; it is charged once the quota plane is back",
			req.Kind.Kind, objectName(req), err, strings.Join(governing.names(), ", "))
		klog.FromContext(ctx).Info("Admitted fail-open", "object", objectName(req), "cluster", w.opts.ClusterName, "reason", err.Error())
		allow.Warnings = []string{msg}
		allow.AuditAnnotations = map[string]string{"quota.miloapis.com/fail-open": msg}
		return allow, resultFailOpen
	}
	return deny(apierrors.NewServiceUnavailable(fmt.Sprintf(
		"the quota plane is unavailable (%v): quota for this %s cannot be decided, so it was not created; nothing was charged, retry once the quota plane is back (cluster %s)",
		err, req.Kind.Kind, w.opts.ClusterName))), resultUnavailable
}

func deny(err apierrors.APIStatus) *admissionv1.AdmissionResponse {
	st := err.Status()
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &st}
}

func objectName(req *admissionv1.AdmissionRequest) string {
	if req.Namespace == "" {
		return req.Name
	}
	return req.Namespace + "/" + req.Name
}

// mapUser is the member's requester as it is sent to the quota plane: the
// member's own names, marked as such (members.IdentitiesExtra) so that the
// quota plane maps each to "<cluster>:<name>" itself; never the member's
// administrators' group, and never quotaplane's own extras (only the
// webhook's own reviews of existing objects say those). The quota plane
// decides the names whatever this sends (memberserve).
func (w *Webhook) mapUser(u authenticationv1.UserInfo) authenticationv1.UserInfo {
	out := authenticationv1.UserInfo{Username: u.Username, UID: u.UID,
		Extra: map[string]authenticationv1.ExtraValue{members.IdentitiesExtra: {members.IdentitiesMember}}}
	for k, v := range u.Extra {
		if strings.HasPrefix(k, members.ExtraPrefix) {
			continue
		}
		out.Extra[k] = v
	}
	for _, g := range u.Groups {
		if g == "system:masters" {
			continue // a member's administrators are not the quota plane's
		}
		out.Groups = append(out.Groups, g)
	}
	return out
}

// errUnavailable marks an answer that is not the quota plane's decision.
var errUnavailable = errors.New("quota plane unavailable")

// forward posts a review to the quota plane and returns its answer; an
// error when the quota plane did not decide (unreachable, not ready, slow).
func (w *Webhook) forward(ctx context.Context, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	body, err := json.Marshal(admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, w.opts.Timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, w.reviewURL, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hresp, err := w.quotaHTTP.Do(hreq)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnavailable, err)
	}
	defer func() { _ = hresp.Body.Close() }()
	data, err := io.ReadAll(io.LimitReader(hresp.Body, maxBody))
	if err != nil {
		return nil, fmt.Errorf("%w: reading its answer: %v", errUnavailable, err)
	}
	if hresp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%w: %s answered %d: %s", errUnavailable, w.reviewURL, hresp.StatusCode, strings.TrimSpace(string(data)))
	}
	out := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(data, out); err != nil || out.Response == nil {
		return nil, fmt.Errorf("%w: its answer is no AdmissionReview (%v)", errUnavailable, err)
	}
	if !out.Response.Allowed && out.Response.Result != nil && out.Response.Result.Code == http.StatusServiceUnavailable {
		// The quota plane answered, but could not decide (its engine is
		// starting or moving): as unavailable, so Ignore policies admit.
		return nil, fmt.Errorf("%w: %s", errUnavailable, out.Response.Result.Message)
	}
	return out.Response, nil
}

// asUpdate turns a scale update into an update of the object it scales,
// read here: the quota plane cannot read this cluster's objects.
func (w *Webhook) asUpdate(ctx context.Context, req *admissionv1.AdmissionRequest, kind schema.GroupVersionKind) error {
	scale := &unstructured.Unstructured{}
	if err := scale.UnmarshalJSON(req.Object.Raw); err != nil {
		return fmt.Errorf("reading the scale of %s: %w", objectName(req), err)
	}
	replicas, found, _ := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	if !found {
		return fmt.Errorf("the scale of %s has no spec.replicas", objectName(req))
	}
	gvr := schema.GroupVersionResource{Group: req.Resource.Group, Version: req.Resource.Version, Resource: req.Resource.Resource}
	current, err := w.memberDynamic.Resource(gvr).Namespace(req.Namespace).Get(ctx, req.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading %s %s to charge its scale: %w", kind.Kind, objectName(req), err)
	}
	path, err := w.replicasPath(ctx, gvr)
	if err != nil {
		return err
	}
	scaled := current.DeepCopy()
	if err := unstructured.SetNestedField(scaled.Object, replicas, path...); err != nil {
		return fmt.Errorf("setting the replicas of %s %s to charge its scale: %w", kind.Kind, objectName(req), err)
	}
	oldRaw, err := current.MarshalJSON()
	if err != nil {
		return err
	}
	newRaw, err := scaled.MarshalJSON()
	if err != nil {
		return err
	}
	req.SubResource, req.RequestSubResource = "", ""
	req.Kind = metav1.GroupVersionKind{Group: kind.Group, Version: kind.Version, Kind: kind.Kind}
	req.Object.Raw, req.OldObject.Raw, req.Object.Object, req.OldObject.Object = newRaw, oldRaw, nil, nil
	req.Operation = admissionv1.Update
	return nil
}

// replicasPath is where an object of gvr keeps its replica count:
// spec.replicas, or a custom resource's specReplicasPath.
func (w *Webhook) replicasPath(ctx context.Context, gvr schema.GroupVersionResource) ([]string, error) {
	var crd *unstructured.Unstructured // none for the built-in kinds
	if gvr.Group != "" && gvr.Group != "apps" {
		c, err := w.memberDynamic.Resource(crdsGVR).Get(ctx, kinds.CRDName(gvr.GroupResource()), metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err): // an aggregated API: the usual place
		case err != nil:
			return nil, fmt.Errorf("reading the definition of %s to charge its scale: %w", gvr.GroupResource(), err)
		default:
			crd = c
		}
	}
	return kinds.ScaleReplicasPath(crd, gvr.Version), nil
}

var crdsGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// reviewURL is where this cluster's reviews are posted.
func reviewURL(host, cluster string) string {
	return strings.TrimSuffix(host, "/") + members.ReviewPath(cluster)
}
