package memberserve

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"

	"github.com/quotaplane/quotaplane/internal/members"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// A review that reaches the reviewer through a control plane's URL is not
// decided, whoever posts it.
func TestReviewsThroughAPlaneAreNotFound(t *testing.T) {
	req := httptest.NewRequest(http.MethodPost, members.ReviewPath("east"), strings.NewReader(`{}`))
	ctx := genericapirequest.WithUser(req.Context(), &user.DefaultInfo{Name: "admin", Groups: []string{user.SystemPrivilegedGroup}})
	req = req.WithContext(planes.WithPlane(ctx, planes.Plane{Kind: planes.Projects, Name: "web"}))
	rec := httptest.NewRecorder()
	(&Reviewer{}).ServeHTTP(rec, req)
	if rec.Code != http.StatusNotFound || !strings.Contains(rec.Body.String(), "not served in the control plane of Project web") {
		t.Errorf("a review through a plane: %d %s, want 404 naming the plane", rec.Code, rec.Body.String())
	}
}
