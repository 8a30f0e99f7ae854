package nativeapi

import (
	"fmt"
	"sync"

	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/quotaplane/quotaplane/config/crd"
)

// reviewKind is QuotaReview, described by its never-installed definition:
// its schema is published in OpenAPI like the stored kinds'; its storage is
// no store (internal/server/quotareview answers it).
var reviewKind = sync.OnceValues(func() (*Kind, error) {
	c, err := crd.Review()
	if err != nil {
		return nil, err
	}
	k, err := buildKind(Scheme(), c)
	if err != nil {
		return nil, fmt.Errorf("serving %s: %w", c.Name, err)
	}
	return k, nil
})

// Answered are the resources of the native groups that are answered, never
// stored, by resource: QuotaReview's "quotareviews". APIGroups serves each
// with the storage given.
type Answered map[string]rest.Storage

// answered reports whether k is answered, never stored: it has no list.
func (k *Kind) answered() bool {
	_, err := Scheme().New(k.GVK.GroupVersion().WithKind(k.GVK.Kind + "List"))
	return err != nil
}
