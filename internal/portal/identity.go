package portal

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// identity is who a bearer token is, as the API server says, and a client
// that acts as them.
type identity struct {
	user   string
	groups []string
	staff  bool
	kube   kubernetes.Interface

	mu  sync.Mutex
	can map[string]bool // authorization answers, by question
}

// identityCache keeps identities by the token's hash for a short while, so
// that a page's calls do not each ask the API server who the user is.
type identityCache struct {
	ttl time.Duration
	mu  sync.Mutex
	m   map[[32]byte]cachedIdentity
}

type cachedIdentity struct {
	id      *identity
	expires time.Time
}

func newIdentityCache(ttl time.Duration) *identityCache {
	return &identityCache{ttl: ttl, m: map[[32]byte]cachedIdentity{}}
}

func (c *identityCache) get(k [32]byte) *identity {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k]
	if !ok || time.Now().After(e.expires) {
		delete(c.m, k)
		return nil
	}
	return e.id
}

func (c *identityCache) put(k [32]byte, id *identity) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	for key, e := range c.m { // keep it small: drop the expired
		if now.After(e.expires) {
			delete(c.m, key)
		}
	}
	c.m[k] = cachedIdentity{id: id, expires: now.Add(c.ttl)}
}

// identify authenticates the request's bearer token with the API server
// (a SelfSubjectReview made with it) and asks whether it is staff.
func (p *Portal) identify(r *http.Request) (*identity, int, error) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || strings.TrimSpace(token) == "" {
		return nil, http.StatusUnauthorized, errors.New("sign in with a Kubernetes bearer token (Authorization: Bearer <token>): a service account's token (kubectl create token NAME) or any token the API server accepts")
	}
	key := sha256.Sum256([]byte(token))
	if id := p.identities.get(key); id != nil {
		return id, 0, nil
	}
	p.mu.RLock()
	cfg := rest.CopyConfig(p.userBase)
	p.mu.RUnlock()
	cfg.BearerToken = strings.TrimSpace(token)
	cfg.UserAgent = "quotaplane-portal (as user)"
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, http.StatusInternalServerError, err
	}
	ctx := r.Context()
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	switch {
	case apierrors.IsUnauthorized(err):
		return nil, http.StatusUnauthorized, errors.New("the API server does not accept this token (expired, revoked or mistyped): create a new one, for example kubectl create token NAME -n NAMESPACE")
	case err != nil:
		return nil, http.StatusBadGateway, fmt.Errorf("asking the API server who this token is: %w", err)
	}
	id := &identity{user: review.Status.UserInfo.Username, groups: review.Status.UserInfo.Groups, kube: kube, can: map[string]bool{}}
	id.staff, err = id.allowed(ctx, "list", "allowancebuckets", "")
	if err != nil {
		return nil, http.StatusBadGateway, err
	}
	p.identities.put(key, id)
	return id, 0, nil
}

// allowed asks the API server whether the user may verb quota resource in
// namespace ("": every namespace), with a SelfSubjectAccessReview.
func (id *identity) allowed(ctx context.Context, verb, resource, namespace string) (bool, error) {
	q := verb + " " + resource + " " + namespace
	id.mu.Lock()
	ok, known := id.can[q]
	id.mu.Unlock()
	if known {
		return ok, nil
	}
	ssar, err := id.kube.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &authorizationv1.ResourceAttributes{
			Group: quotav1alpha1.GroupName, Resource: resource, Verb: verb, Namespace: namespace}}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the API server whether %s may %s %s: %w", id.user, verb, resource, err)
	}
	id.mu.Lock()
	id.can[q] = ssar.Status.Allowed
	id.mu.Unlock()
	return ssar.Status.Allowed, nil
}
