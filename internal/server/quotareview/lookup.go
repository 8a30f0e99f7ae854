package quotareview

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/quotaplane/quotaplane/internal/planes"
)

// listAbove is how many objects of one resource and namespace are read by
// one list rather than one get each.
const listAbove = 4

// lookUp reads, for every object the reviewed user may read, whether it
// exists: one get each, or one list per resource and namespace where the
// review holds many. Reads go through the server's loopback, in the plane
// the review came to, as the reviewed user (impersonated): they are that
// user's load, classified and queued by API Priority and Fairness in its
// flow like its own requests, and authorized as its own reads would be —
// never serve's exempt loopback identity (docs/what-if.md). They are served
// from the watch cache (resourceVersion "0"): a review tells what applying
// would do as the server knows things now, not a quorum read per object.
func (rv *reviewRun) lookUp(ctx context.Context) error {
	cfg := rest.CopyConfig(rv.r.Loopback)
	if plane, ok := planes.From(ctx); ok {
		cfg = planes.ConfigFor(cfg, plane)
	}
	cfg.Impersonate = impersonation(rv.user)
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	groups := map[groupKey][]*entry{}
	var order []groupKey
	for _, e := range rv.entries {
		if e.out.Result != "" || e.generated {
			continue
		}
		k := groupKey{gvr: e.mapping.Resource, ns: e.obj.GetNamespace()}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], e)
	}
	for _, k := range order {
		list := groups[k]
		client := dyn.Resource(k.gvr).Namespace(k.ns)
		if len(list) <= listAbove {
			for _, e := range list {
				got, err := client.Get(ctx, e.obj.GetName(), metav1.GetOptions{ResourceVersion: "0"})
				switch {
				case apierrors.IsNotFound(err):
				case err != nil:
					return readFailed(k, err)
				default:
					e.existing = got
				}
			}
			continue
		}
		byName := map[string]*unstructured.Unstructured{}
		opts := metav1.ListOptions{ResourceVersion: "0"}
		for {
			page, err := client.List(ctx, opts)
			if err != nil {
				return readFailed(k, err)
			}
			for i := range page.Items {
				byName[page.Items[i].GetName()] = &page.Items[i]
			}
			if opts.Continue = page.GetContinue(); opts.Continue == "" {
				break
			}
		}
		for _, e := range list {
			e.existing = byName[e.obj.GetName()]
		}
	}
	return nil
}

func readFailed(k groupKey, err error) error {
	where := ""
	if k.ns != "" {
		where = " in namespace " + k.ns
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("reading the %s%s the review names: %v; nothing was taken, retry", k.gvr.GroupResource(), where, err))
}

// impersonation is how the loopback speaks as u: its name, UID, groups and
// extras.
func impersonation(u user.Info) rest.ImpersonationConfig {
	groups := u.GetGroups()
	return rest.ImpersonationConfig{UserName: u.GetName(), UID: u.GetUID(), Groups: groups, Extra: u.GetExtra()}
}
