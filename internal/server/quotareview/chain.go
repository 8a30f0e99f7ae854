package quotareview

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/charge"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// throughChain sends every object the review still answers through the
// server's admission chain as a dry run — a create, or an update of the
// object that exists — as the reviewed user: CRD schema defaults, built-in
// defaulting (a Pod's requests from its limits), mutating webhooks
// (called with dryRun) and MutatingAdmissionPolicies, validation. The
// object the dry run returns is what applying it would store, and is what
// quota is decided on; a refusal is what applying it would answer. The
// charging steps skip these dry runs (charge.ReviewPassExtra): the review
// decides every object together, in order, after.
//
// An object whose namespace an earlier object of the review creates cannot
// be dry-run there: it is decided as written, and the review says so.
func (rv *reviewRun) throughChain(ctx context.Context) error {
	cfg := rest.CopyConfig(rv.r.Loopback)
	if plane, ok := planes.From(ctx); ok {
		cfg = planes.ConfigFor(cfg, plane)
	}
	cfg.Impersonate = impersonation(rv.user)
	extra := map[string][]string{}
	for k, v := range cfg.Impersonate.Extra {
		extra[k] = v
	}
	extra[charge.ReviewPassExtra] = []string{"true"}
	cfg.Impersonate.Extra = extra
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	created := map[string]int{} // namespaces the review creates
	var todo []int
	for i, e := range rv.entries {
		if e.out.Result != "" {
			continue
		}
		if e.mapping.Resource.Group == "" && e.mapping.Resource.Resource == "namespaces" && e.existing == nil {
			created[e.obj.GetName()] = i
		}
		todo = append(todo, i)
	}
	errs := make([]error, len(rv.entries))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(chainWorkers, len(todo)) {
		wg.Go(func() {
			for i := range next {
				e := rv.entries[i]
				e.admitted, errs[i] = dryRun(ctx, dyn, e)
			}
		})
	}
	for _, i := range todo {
		next <- i
	}
	close(next)
	wg.Wait()
	for _, i := range todo {
		e, err := rv.entries[i], errs[i]
		if err == nil {
			continue
		}
		if j, ok := created[e.obj.GetNamespace()]; ok && j < i && apierrors.IsNotFound(err) {
			rv.notes = append(rv.notes, fmt.Sprintf("objects[%d] goes in namespace %s, which objects[%d] creates: it is decided as written, without the defaults and mutating admission its apply would get", i, e.obj.GetNamespace(), j))
			continue
		}
		rv.chainRefused(e, err)
	}
	return nil
}

// chainWorkers is how many of a review's dry runs are in flight at once.
// They are the reviewed user's requests, queued by API Priority and
// Fairness in that user's flow; a few at once keep a review of 1,000
// objects near a second (docs/benchmarks.md §20).
const chainWorkers = 4

// dryRun sends one object through the chain: a create, or an update of the
// object that exists.
func dryRun(ctx context.Context, dyn dynamic.Interface, e *entry) (*unstructured.Unstructured, error) {
	client := dyn.Resource(e.mapping.Resource).Namespace(e.obj.GetNamespace())
	if e.existing == nil {
		return client.Create(ctx, e.obj.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "quotaplane-review"})
	}
	upd := applied(e.existing, e.obj)
	upd.SetResourceVersion(e.existing.GetResourceVersion())
	return client.Update(ctx, upd, metav1.UpdateOptions{DryRun: []string{metav1.DryRunAll}, FieldManager: "quotaplane-review"})
}

// chainRefused records what applying the object would answer.
func (rv *reviewRun) chainRefused(e *entry, err error) {
	st, ok := err.(apierrors.APIStatus)
	if !ok {
		e.refuse(quotav1alpha1.ReviewReasonInvalid, err.Error())
		return
	}
	switch code := st.Status().Code; {
	case code == http.StatusBadRequest && strings.Contains(err.Error(), "does not support dry run"):
		e.refuse(quotav1alpha1.ReviewReasonDryRunUnsupported, fmt.Sprintf(
			"%v: a mutating webhook that cannot be called as a dry run (its sideEffects are not None) would see this object, so what applying it would store is not known; nothing is guessed: give the webhook sideEffects: None, or apply it", err))
	case code == http.StatusTooManyRequests || code == http.StatusServiceUnavailable:
		e.refuse(quotav1alpha1.ReviewReasonNotYet, err.Error())
	default:
		rv.refused(e, err)
	}
}
