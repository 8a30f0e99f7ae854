package quotareview

import (
	"context"
	"errors"
	"fmt"
	goruntime "runtime"
	"sync"
	"sync/atomic"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
)

// REST answers QuotaReviews: create only, nothing stored.
type REST struct {
	plugin atomic.Pointer[charge.Charger]
	// Authorizer decides, as for the request itself (in a plane, as the
	// plane does), whether the reviewed user may read, create or patch each
	// object, and whether the requester may impersonate spec.user. Set
	// before the server serves.
	Authorizer authorizer.Authorizer
	// RootAuthorizer is the root's, which admission decides with: whether
	// the reviewed user may charge a ResourceClaim's consumer.
	RootAuthorizer authorizer.Authorizer
	// Loopback reaches the server, and its planes through
	// planes.ConfigFor, to read the objects that exist. Set before the
	// server serves.
	Loopback *restclient.Config

	mapperOnce sync.Once
	mapper     meta.ResettableRESTMapper
	mapperErr  error

	// running counts each requester's reviews being answered (PerUser),
	// total all of them (AtOnce).
	mu      sync.Mutex
	running map[string]int
	total   int
}

// PerUser bounds the reviews one requester (the authenticated user that
// posts them, whoever it reviews as) has answered at once on a replica; the
// next is refused 429 with Retry-After (RetryAfterSeconds), as API Priority
// and Fairness refuses a flow it cannot queue. A review of 1,000 objects is
// a thousand creates' worth of reads and decisions: the bound keeps one
// tenant's loop of them from crowding out everyone's creates.
const (
	PerUser           = 2
	RetryAfterSeconds = 1
)

// AtOnce bounds the reviews a replica answers at once, whoever asks: half
// its cores (GOMAXPROCS), at least one. A review of 1,000 objects is CPU-bound (its
// reads, rendering, decisions); API Priority and Fairness shares the
// server's seats, not its CPU, so without this bound reviews looping from
// a few tenants fill every core and other tenants' creates wait behind
// them (docs/benchmarks.md §21).
func AtOnce() int { return max(1, goruntime.GOMAXPROCS(0)/2) }

// begin takes one of name's review slots; false when all PerUser are
// taken, or the replica answers AtOnce reviews already.
func (r *REST) begin(name string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.running[name] >= PerUser || r.total >= AtOnce() {
		return false
	}
	r.total++
	if r.running == nil {
		r.running = map[string]int{}
	}
	r.running[name]++
	return true
}

// end gives name's slot back.
func (r *REST) end(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.total--
	if r.running[name]--; r.running[name] <= 0 {
		delete(r.running, name)
	}
}

var (
	_ rest.Creater              = &REST{}
	_ rest.Scoper               = &REST{}
	_ rest.SingularNameProvider = &REST{}
	_ rest.Storage              = &REST{}
)

// Use makes p the plugin the charging component objects are reviewed with (claimpolicy.Register's
// created callback).
func (r *REST) Use(p *charge.Charger) { r.plugin.Store(p) }

// New implements rest.Storage.
func (r *REST) New() runtime.Object { return &quotav1alpha1.QuotaReview{} }

// Destroy implements rest.Storage.
func (r *REST) Destroy() {}

// NamespaceScoped implements rest.Scoper: a review is cluster-scoped, as a
// SelfSubjectAccessReview; its objects name their namespaces.
func (r *REST) NamespaceScoped() bool { return false }

// GetSingularName implements rest.SingularNameProvider.
func (r *REST) GetSingularName() string { return "quotareview" }

// Create answers a review: the object created is returned with its status,
// and nothing is stored.
func (r *REST) Create(ctx context.Context, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	review, ok := obj.(*quotav1alpha1.QuotaReview)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a QuotaReview: %T", obj))
	}
	objs, errs := parse(review)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(quotav1alpha1.SchemeGroupVersion.WithKind("QuotaReview").GroupKind(), review.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, obj.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	p := r.plugin.Load()
	if p == nil {
		return nil, apierrors.NewServiceUnavailable("quota reviews need serve's quota engine and its ClaimCreationPolicy admission, which are not running (serve was started without its engine, or is starting); retry in a few seconds")
	}
	requester, ok := genericapirequest.UserFrom(ctx)
	if !ok {
		return nil, apierrors.NewUnauthorized("a quota review needs an authenticated user")
	}
	if !r.begin(requester.GetName()) {
		return nil, apierrors.NewTooManyRequests(fmt.Sprintf(
			"quota review by user %q not answered now: a user has at most %d reviews answered at once and this server at most %d, and that many are being answered; nothing was taken: retry after %d s (client-go does), or review more objects in one review (up to %d)",
			requester.GetName(), PerUser, AtOnce(), RetryAfterSeconds, quotav1alpha1.MaxReviewObjects), RetryAfterSeconds)
	}
	defer r.end(requester.GetName())
	if review.Spec.Policy != nil {
		res, err := r.preview(ctx, p, requester, review.Spec)
		if err != nil {
			return nil, err
		}
		out := review.DeepCopy()
		out.Status = quotav1alpha1.QuotaReviewStatus{Fits: res.Summary.WouldRefuse == 0 && res.Summary.FailedToEvaluate == 0,
			User: requester.GetName(), Refused: int32(min(res.Summary.WouldRefuse, 1<<30)), Message: res.Summary.Message, PolicyImpact: res}
		out.CreationTimestamp = metav1.Now()
		return out, nil
	}
	reviewed, err := r.reviewedUser(ctx, requester, review.Spec)
	if err != nil {
		return nil, err
	}
	mapper, err := r.restMapper()
	if err != nil {
		return nil, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the kinds the server serves: %v; retry", err))
	}
	rv := &reviewRun{r: r, p: p, user: reviewed, mapper: mapper, review: review, objects: objs}
	if err := rv.run(ctx); err != nil {
		return nil, err
	}
	out := review.DeepCopy()
	out.Status = rv.status()
	out.CreationTimestamp = metav1.Now()
	return out, nil
}

// reviewedUser is who the review answers for: the requester, or spec.user
// when the requester may impersonate it and each of its groups.
func (r *REST) reviewedUser(ctx context.Context, requester user.Info, spec quotav1alpha1.QuotaReviewSpec) (user.Info, error) {
	if spec.User == "" {
		return requester, nil
	}
	ask := func(resource, name string) error {
		d, reason, err := r.Authorizer.Authorize(ctx, authorizer.AttributesRecord{User: requester, Verb: "impersonate", Resource: resource, Name: name, ResourceRequest: true})
		if d == authorizer.DecisionAllow {
			return nil
		}
		why := reason
		if err != nil {
			why = err.Error()
		}
		return apierrors.NewForbidden(quotav1alpha1.Resource("quotareviews"), "", fmt.Errorf(
			"user %q may not review as %s %q: it needs verb impersonate on %s named %q (%s); review as yourself by leaving spec.user empty, or ask an administrator for the binding",
			requester.GetName(), singular(resource), name, resource, name, why))
	}
	if err := ask("users", spec.User); err != nil {
		return nil, err
	}
	for _, g := range spec.Groups {
		if err := ask("groups", g); err != nil {
			return nil, err
		}
	}
	groups := append([]string(nil), spec.Groups...)
	groups = append(groups, user.AllAuthenticated)
	return &user.DefaultInfo{Name: spec.User, Groups: groups}, nil
}

func singular(resource string) string { return resource[:len(resource)-1] }

// restMapper maps the reviewed objects' kinds to their resources, from the
// server's discovery (read once, and again for a kind not found).
func (r *REST) restMapper() (meta.ResettableRESTMapper, error) {
	r.mapperOnce.Do(func() {
		if r.Loopback == nil {
			r.mapperErr = errors.New("no loopback client")
			return
		}
		d, err := discovery.NewDiscoveryClientForConfig(r.Loopback)
		if err != nil {
			r.mapperErr = err
			return
		}
		r.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(d))
	})
	return r.mapper, r.mapperErr
}
