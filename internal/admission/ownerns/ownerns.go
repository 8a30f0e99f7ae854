package ownerns

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"

	rmv1alpha1 "github.com/quotaplane/quotaplane/api/resourcemanager/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/admission/refusal"
	"github.com/quotaplane/quotaplane/internal/planes"
)

// Wait bounds how long a request waits for a tenant's namespace that its
// controller has not made yet.
const Wait = 5 * time.Second

// poll is how often it looks meanwhile.
const poll = 50 * time.Millisecond

// ErrNotOwned: the namespace is no tenant's; the caller answers as it would
// without this package.
var ErrNotOwned = errors.New("not a tenant's namespace")

// Owner is the tenant whose controller makes a namespace.
type Owner struct {
	Kind     string
	Name     string
	resource schema.GroupVersionResource
}

func (o Owner) String() string { return o.Kind + " " + o.Name }

// OwnerOf is the tenant that namespace ns is made for, if any.
func OwnerOf(ns string) (Owner, bool) {
	if name, ok := strings.CutPrefix(ns, rmv1alpha1.OrganizationNamespacePrefix); ok && name != "" {
		return Owner{Kind: "Organization", Name: name, resource: rmv1alpha1.SchemeGroupVersion.WithResource("organizations")}, true
	}
	if name, ok := strings.CutPrefix(ns, strings.TrimSuffix(planes.ProjectNamespace("x"), "x")); ok && name != "" {
		return Owner{Kind: "Project", Name: name, resource: rmv1alpha1.SchemeGroupVersion.WithResource("projects")}, true
	}
	return Owner{}, false
}

// Waiter reads namespaces and tenants.
type Waiter struct {
	Namespaces corelisters.NamespaceLister
	Kube       kubernetes.Interface
	Dynamic    dynamic.Interface
}

// Await answers for namespace ns, which a request of what (a phrase: "this
// ConfigMap", "the claim of this Project") needs: nil once it exists (at
// once, or within Wait while its tenant exists); ErrNotOwned when it is no
// tenant's, or is being deleted (the caller's own answer applies); else a
// retryable status naming the tenant — 429 when the tenant does not exist
// yet, 503 when it exists and its namespace is not made within Wait.
// gr and name are the request's, for the status.
func (w *Waiter) Await(ctx context.Context, ns, what string, gr schema.GroupResource, name string) error {
	owner, ok := OwnerOf(ns)
	if !ok || w.Dynamic == nil || w.Namespaces == nil {
		return ErrNotOwned
	}
	deadline := time.Now().Add(Wait)
	var tenant *unstructured.Unstructured
	for {
		switch exists, err := w.namespace(ctx, ns); {
		case err != nil:
			return err
		case exists:
			return nil
		}
		if tenant == nil || time.Now().After(deadline) {
			got, err := w.Dynamic.Resource(owner.resource).Get(ctx, owner.Name, metav1.GetOptions{})
			switch {
			case apierrors.IsNotFound(err):
				return refusal.NotYet(gr, name, fmt.Sprintf(
					"%s goes in namespace %s, which quotaplane makes for %s, and %s does not exist yet: create it first (before what goes in its namespace), then retry; nothing was created",
					what, ns, owner, owner))
			case err != nil:
				return refusal.NotSeenYet(gr, name, fmt.Sprintf("%s goes in namespace %s, which does not exist yet, and reading %s failed (%v): retry; nothing was created", what, ns, owner, err))
			case got.GetDeletionTimestamp() != nil:
				return ErrNotOwned
			}
			tenant = got
		}
		if time.Now().After(deadline) {
			return refusal.NotSeenYet(gr, name, fmt.Sprintf(
				"%s goes in namespace %s, which quotaplane makes for %s; %s exists but its namespace is not made yet (waited %s; its Ready condition: %s): retry in a moment; nothing was created",
				what, ns, owner, owner, Wait, readyText(tenant)))
		}
		select {
		case <-ctx.Done():
			return refusal.NotSeenYet(gr, name, fmt.Sprintf("%s goes in namespace %s, which quotaplane is making for %s: retry in a moment; nothing was created", what, ns, owner))
		case <-time.After(poll):
		}
	}
}

// namespace reports whether ns exists and is not being deleted; the
// informer first, then a live read (one made a moment ago).
func (w *Waiter) namespace(ctx context.Context, ns string) (bool, error) {
	n, err := w.Namespaces.Get(ns)
	if apierrors.IsNotFound(err) && w.Kube != nil {
		n, err = w.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, err
	}
	if n.Status.Phase == corev1.NamespaceTerminating || n.DeletionTimestamp != nil {
		return false, ErrNotOwned
	}
	return true, nil
}

// readyText is a tenant's Ready condition as one phrase.
func readyText(u *unstructured.Unstructured) string {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == rmv1alpha1.ConditionReady {
			return fmt.Sprintf("%v %v: %v", m["status"], m["reason"], m["message"])
		}
	}
	return "not written yet"
}
