package planes

import (
	"fmt"
	"net/http"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestObjectNotFound(t *testing.T) {
	notServed := &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotFound,
		Reason: metav1.StatusReasonNotFound, Message: "the control plane of Project web is being removed with it"}}
	for _, tc := range []struct {
		what string
		err  error
		want bool
	}{
		{"the object is not found", apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s1"), true},
		{"wrapped", fmt.Errorf("reading: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s1")), true},
		{"another object", apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, "s2"), false},
		{"the plane is not served", notServed, false},
		{"no error", nil, false},
		{"another error", apierrors.NewServiceUnavailable("starting"), false},
	} {
		if got := ObjectNotFound(tc.err, "s1"); got != tc.want {
			t.Errorf("%s: ObjectNotFound = %v, want %v", tc.what, got, tc.want)
		}
	}
}
