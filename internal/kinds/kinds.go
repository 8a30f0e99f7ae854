package kinds

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"

	"github.com/quotaplane/quotaplane/internal/quota"
)

// Kind says whether the API server serves kind in group ("" for the core
// group), from discovery. When it does not, hint is what to say of it: the
// nearest kind of that group, or that the group is not served at all. An
// error means discovery could not be read: nothing is known.
func Kind(d discovery.DiscoveryInterface, gk schema.GroupKind) (served bool, hint string, err error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return false, "", err
	}
	var kinds []string
	for _, g := range groups.Groups {
		if g.Name != gk.Group {
			continue
		}
		for _, v := range g.Versions {
			list, err := d.ServerResourcesForGroupVersion(v.GroupVersion)
			if err != nil {
				return false, "", err
			}
			for _, r := range list.APIResources {
				if strings.Contains(r.Name, "/") {
					continue // a subresource
				}
				if r.Kind == gk.Kind {
					return true, "", nil
				}
				kinds = append(kinds, r.Kind)
			}
		}
		if near := quota.Nearest(gk.Kind, kinds); near != "" {
			return false, fmt.Sprintf("did you mean %s?", near), nil
		}
		return false, fmt.Sprintf("group %s serves no kind of that name", groupName(gk.Group)), nil
	}
	return false, fmt.Sprintf("no API group %s is served; install its CustomResourceDefinition or API service", groupName(gk.Group)), nil
}

func groupName(g string) string {
	if g == "" {
		return `"" (core)`
	}
	return g
}

// KindString is how messages write a group and kind: group/Kind, or Kind
// for the core group.
func KindString(gk schema.GroupKind) string {
	if gk.Group == "" {
		return gk.Kind
	}
	return gk.Group + "/" + gk.Kind
}

// KindCache answers Kind from discovery read at most once per maxAge, and
// afresh whenever a kind is not found there (a CRD installed a moment ago)
// or discovery fails. The engine asks it for every registration it judges:
// read each time, discovery cost two requests and their decoding per
// registration per change.
type KindCache struct {
	d      discovery.CachedDiscoveryInterface
	maxAge time.Duration
	now    func() time.Time

	mu   sync.Mutex
	read time.Time
}

// NewKindCache answers from d, read again after maxAge.
func NewKindCache(d discovery.DiscoveryInterface, maxAge time.Duration) *KindCache {
	return &KindCache{d: memory.NewMemCacheClient(d), maxAge: maxAge, now: time.Now}
}

// Kind is Kind over the cached discovery: a kind found is served as of at
// most maxAge ago; a kind not found, or an error, is asked again of the
// server before it is answered.
func (k *KindCache) Kind(gk schema.GroupKind) (served bool, hint string, err error) {
	k.mu.Lock()
	if now := k.now(); now.Sub(k.read) > k.maxAge {
		k.d.Invalidate()
		k.read = now
	}
	k.mu.Unlock()
	if served, hint, err = Kind(k.d, gk); err == nil && served {
		return served, hint, nil
	}
	k.mu.Lock()
	k.d.Invalidate()
	k.read = k.now()
	k.mu.Unlock()
	return Kind(k.d, gk)
}
