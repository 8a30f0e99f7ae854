package portal

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/json"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/quota"
)

// SizeAnswer is what the request form shows under "How much do you need?":
// for amount more of a resource type, the limit each level of the
// organization would need, from a QuotaReview of a claim for it — the
// engine's own numbers, taking nothing.
type SizeAnswer struct {
	Fits bool `json:"fits"`
	// Levels are the levels of the organization the amount is drawn from:
	// the consumer, then its ancestors.
	Levels []SizeLevel `json:"levels"`
	// OtherLevelShort: a level outside the organization (a group's budget
	// the platform sets) is short too; staff see it.
	OtherLevelShort bool `json:"otherLevelShort,omitempty"`
	// Message, when the claim could not be decided for quota at all (the
	// resource type does not charge this kind of consumer).
	Message string `json:"message,omitempty"`
}

// SizeLevel is one level's limit, allocation, and the limit it needs.
type SizeLevel struct {
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	Limit     int64  `json:"limit"`
	Unlimited bool   `json:"unlimited,omitempty"`
	Allocated int64  `json:"allocated"`
	Needed    int64  `json:"needed"`
	Short     int64  `json:"short"`
}

// size answers GET /portal/api/size?organization=&kind=&consumer=&resourceType=&amount=[&dimensions=k=v,...]
// to whoever may read the organization's quota, for the organization or
// one of its projects. The review is the portal's own (it may charge any
// consumer), and its answer is cut to the organization's levels.
func (p *Portal) size(w http.ResponseWriter, r *http.Request, id *identity) {
	q := r.URL.Query()
	org, kind, name, rt := q.Get("organization"), q.Get("kind"), q.Get("consumer"), q.Get("resourceType")
	amount, err := strconv.ParseInt(q.Get("amount"), 10, 64)
	switch {
	case org == "":
		writeError(w, http.StatusBadRequest, "size: the parameter organization is required: the organization whose quota to size")
		return
	case kind != "Organization" && kind != "Project":
		writeError(w, http.StatusBadRequest, fmt.Sprintf("size: kind %q: the consumer's kind is Organization or Project", kind))
		return
	case name == "":
		writeError(w, http.StatusBadRequest, "size: the parameter consumer is required: the name of the Organization or Project")
		return
	case rt == "":
		writeError(w, http.StatusBadRequest, "size: the parameter resourceType is required: choose a resource type")
		return
	case err != nil || amount < 1:
		writeError(w, http.StatusBadRequest, fmt.Sprintf("size: amount %q: how much more you need, a whole number of base units above 0", q.Get("amount")))
		return
	}
	ns := rmv1alpha1.OrganizationNamespace(org)
	allowed, err := id.allowed(r.Context(), "list", "allowancebuckets", ns)
	ours := (kind == "Organization" && name == org) || (kind == "Project" && p.projectOrganization(name) == org)
	if err != nil || !allowed || !ours {
		// The same answer for a consumer that does not exist, one of
		// another organization, and an organization the user may not read.
		writeError(w, http.StatusNotFound, fmt.Sprintf("%s %s of organization %q is not known to %s: check the names, or ask the organization's owners to bind you", kind, name, org, id.user))
		return
	}
	dims, err := parseDimensions(q.Get("dimensions"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	claim := &quotav1alpha1.ResourceClaim{
		TypeMeta:   metav1.TypeMeta{APIVersion: quotav1alpha1.SchemeGroupVersion.String(), Kind: "ResourceClaim"},
		ObjectMeta: metav1.ObjectMeta{GenerateName: "portal-sizing-", Namespace: ns},
		Spec: quotav1alpha1.ResourceClaimSpec{
			ConsumerRef: quotav1alpha1.ConsumerRef{APIGroup: rmv1alpha1.GroupName, Kind: kind, Name: name},
			Requests:    []quotav1alpha1.ResourceRequest{{ResourceType: quotav1alpha1.ResourceType(rt), Amount: amount, Dimensions: dims}},
		},
	}
	raw, err := json.Marshal(claim)
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	p.mu.RLock()
	reviews := p.reviews
	p.mu.RUnlock()
	got, err := reviews.QuotaV1alpha1().QuotaReviews().Create(r.Context(), &quotav1alpha1.QuotaReview{
		Spec: quotav1alpha1.QuotaReviewSpec{Objects: []runtime.RawExtension{{Raw: raw}}}}, metav1.CreateOptions{})
	if apierrors.IsNotFound(err) {
		writeError(w, http.StatusNotImplemented, fmt.Sprintf("sizing %d more of %s needs QuotaReviews, which quotaplane serve answers and this API server does not: compare with the numbers under Now instead", amount, rt))
		return
	}
	if err != nil {
		writeError(w, http.StatusBadGateway, fmt.Sprintf("reviewing %d more of %s for %s %s (a QuotaReview): %v; retry in a moment", amount, rt, kind, name, err))
		return
	}
	writeJSON(w, p.sizeAnswer(got.Status, org, rt, amount))
}

// sizeAnswer reads the review: the levels of the organization, each with
// the limit amount more needs (quota.Size).
func (p *Portal) sizeAnswer(st quotav1alpha1.QuotaReviewStatus, org, rt string, amount int64) SizeAnswer {
	out := SizeAnswer{Fits: st.Fits, Levels: []SizeLevel{}}
	if len(st.Objects) == 1 && st.Objects[0].Result == quotav1alpha1.ReviewRefused && st.Objects[0].Reason != quotav1alpha1.ReviewReasonQuotaExceeded {
		out.Message = st.Objects[0].Message
		return out
	}
	var levels []quota.SizingLevel
	for _, b := range st.Buckets {
		if b.ResourceType != rt {
			continue
		}
		levels = append(levels, quota.SizingLevel{Consumer: quota.ConsumerID{APIGroup: b.ConsumerRef.APIGroup, Kind: b.ConsumerRef.Kind, Namespace: b.ConsumerRef.Namespace, Name: b.ConsumerRef.Name},
			Limit: b.Limit, Unlimited: b.Unlimited, Allocated: b.Allocated})
	}
	for _, s := range quota.Size(levels, amount) {
		c := s.Consumer
		inOrg := c.Namespace == "" && c.APIGroup == rmv1alpha1.GroupName &&
			((c.Kind == "Organization" && c.Name == org) || (c.Kind == "Project" && p.projectOrganization(c.Name) == org))
		if !inOrg {
			out.OtherLevelShort = out.OtherLevelShort || s.Short > 0
			continue
		}
		out.Levels = append(out.Levels, SizeLevel{Kind: c.Kind, Name: c.Name, Limit: s.Limit, Unlimited: s.Unlimited, Allocated: s.Allocated, Needed: s.Needed, Short: s.Short})
	}
	return out
}

// parseDimensions reads "k=v,k2=v2", as the request link writes them.
func parseDimensions(s string) ([]quotav1alpha1.Dimension, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []quotav1alpha1.Dimension
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("size: dimensions %q: each is key=value, separated by commas", s)
		}
		out = append(out, quotav1alpha1.Dimension{Key: k, Value: v})
	}
	return out, nil
}
