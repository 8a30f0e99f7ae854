package crdinstall

import (
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestWritesWhileStartingAreRetried: the refusal an admission plugin gives
// until its informers have listed everything (a 403 saying it is not ready)
// and a busy server are retried; a real refusal is not.
func TestWritesWhileStartingAreRetried(t *testing.T) {
	gr := schema.GroupResource{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}
	for _, tc := range []struct {
		err   error
		retry bool
	}{
		{apierrors.NewForbidden(gr, ReviewerRole, errors.New("not yet ready to handle request")), true},
		{apierrors.NewServiceUnavailable("starting"), true},
		{apierrors.NewTooManyRequests("busy", 1), true},
		{apierrors.NewForbidden(gr, ReviewerRole, errors.New("user cannot create clusterrolebindings")), false},
		{apierrors.NewBadRequest("invalid"), false},
	} {
		if got := notReadyYet(tc.err); got != tc.retry {
			t.Errorf("%v: retried %v, want %v", tc.err, got, tc.retry)
		}
	}
}
