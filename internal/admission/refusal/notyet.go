package refusal

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// RetryAfterSeconds is the Retry-After of the answers below.
const RetryAfterSeconds = 1

// NotYet answers a request that needs an object that does not exist yet (a
// Project's Organization, the Project an object is charged to): 429 with
// Retry-After, as the API server answers an eviction a disruption budget
// blocks for now. client-go retries it by itself (up to ten times), and
// GitOps tools that apply a directory re-apply what failed, so documents
// applied in any order converge; a 422 would be final, a 500 a failed sync
// reported as the server's fault (docs/tenancy.md "Applies in any order").
//
// fieldPath, when given, names the field that names what is missing
// (spec.ownerRef.name), as a cause: clients find it where a 422's causes
// are.
func NotYet(gr schema.GroupResource, name, msg string, fieldPath ...string) *apierrors.StatusError {
	err := retryable(http.StatusTooManyRequests, metav1.StatusReasonTooManyRequests, gr, name, msg)
	for _, f := range fieldPath {
		err.ErrStatus.Details.Causes = append(err.ErrStatus.Details.Causes, metav1.StatusCause{Type: metav1.CauseTypeFieldValueNotFound, Message: msg, Field: f})
	}
	return err
}

// NotSeenYet answers a request that needs an object that exists, which the
// server has not caught up with within a bounded wait (a namespace its
// controller makes a moment after its owner is stored, a Project the quota
// engine's watch has not delivered yet): 503 with Retry-After.
func NotSeenYet(gr schema.GroupResource, name, msg string) *apierrors.StatusError {
	return retryable(http.StatusServiceUnavailable, metav1.StatusReasonServiceUnavailable, gr, name, msg)
}

func retryable(code int32, reason metav1.StatusReason, gr schema.GroupResource, name, msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Code: code, Reason: reason, Message: msg,
		Details: &metav1.StatusDetails{Group: gr.Group, Kind: gr.Resource, Name: name, RetryAfterSeconds: RetryAfterSeconds},
	}}
}
