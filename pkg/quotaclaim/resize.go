package quotaclaim

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// AnnotationTotal is written on each claim a Resize makes: what the
// owner's claims add up to once it is granted (the amounts Resize was
// asked for), so a later call knows the change in flight.
const AnnotationTotal = "quota.miloapis.com/owner-total"

// AnnotationReplaces marks a claim a Resize made for the whole of a smaller
// size: once it is Granted, every earlier claim of the owner is released.
const AnnotationReplaces = "quota.miloapis.com/replaces-earlier"

// Resize makes owner's claims add up to requests, all or nothing. Claims
// are immutable, so a change is a claim of its own, decided like any:
//
//   - growth only (no amount smaller than now): a growth claim for the
//     difference (named <Name>-<n>). Granted, the owner may use requests;
//     Denied or Pending, it keeps what it had, and nothing of the growth is
//     held.
//   - anything smaller: a replacement claim for the whole of requests,
//     made before the earlier claims are broken — it needs room for the
//     new size beside the old one — and, once it is Granted, every earlier
//     claim is released (by this call or the next one: a crash in between
//     leaves the owner counted twice for a while, never uncounted).
//
// It returns the change's decision (Granted once the owner's claims add up
// to requests). Called again, it goes on where it stopped; asked for other
// amounts while a change waits, it withdraws the waiting claim (it holds
// nothing) and starts the new change. With no claim yet, it is Ensure. A
// service whose owners change size calls Resize, never Ensure, once an
// owner may have been resized: after a replacement the first claim is gone,
// and Ensure would make it again.
func (c *Claimer) Resize(ctx context.Context, owner Owner, consumer quotav1alpha1.ConsumerRef, requests []quotav1alpha1.ResourceRequest) (Status, error) {
	if err := c.validate(owner); err != nil {
		return Status{}, err
	}
	claims := c.Client.QuotaV1alpha1().ResourceClaims(c.Namespace)
	list, err := claims.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{LabelOwnerUID: string(owner.UID), quotav1alpha1.LabelManagedBy: c.Service}.String()})
	if err != nil {
		return Status{}, err
	}
	var own []*quotav1alpha1.ResourceClaim
	for i := range list.Items {
		cl := &list.Items[i]
		if cl.Annotations[AnnotationCreator] == c.Identity && cl.DeletionTimestamp == nil && c.indexOf(owner, cl.Name) >= 0 {
			own = append(own, cl)
		}
	}
	slices.SortFunc(own, func(a, b *quotav1alpha1.ResourceClaim) int {
		return c.indexOf(owner, a.Name) - c.indexOf(owner, b.Name)
	})
	if len(own) == 0 {
		return c.Ensure(ctx, owner, consumer, requests) // the first claim
	}
	// The break after a granted replacement: earlier claims released.
	for i := len(own) - 1; i > 0; i-- {
		if own[i].Annotations[AnnotationReplaces] == "true" && StatusOf(own[i]).Phase == Granted {
			for _, old := range own[:i] {
				if err := c.deleteClaim(ctx, old); err != nil {
					return Status{}, err
				}
			}
			own = own[i:]
			break
		}
	}
	last := own[len(own)-1]
	want := totalKey(requests)
	if st := StatusOf(last); st.Phase != Granted {
		if len(own) > 1 && last.Annotations[AnnotationTotal] == want {
			return st, nil // the change asked for, waiting
		}
		if len(own) > 1 {
			// Another size than the one waiting: withdraw it (it holds
			// nothing) and start again.
			if err := c.deleteClaim(ctx, last); err != nil {
				return Status{}, err
			}
			own = own[:len(own)-1]
		} else {
			return st, nil // the owner's first claim is not granted yet: nothing to resize
		}
	}
	held := map[string]quotav1alpha1.ResourceRequest{}
	for _, cl := range own {
		if StatusOf(cl).Phase != Granted {
			continue
		}
		for _, r := range cl.Spec.Requests {
			k := cellKey(r)
			h := held[k]
			h.ResourceType, h.Dimensions, h.Amount = r.ResourceType, r.Dimensions, h.Amount+r.Amount
			held[k] = h
		}
	}
	var growth []quotav1alpha1.ResourceRequest
	shrinks := false
	asked := map[string]bool{}
	for _, r := range requests {
		k := cellKey(r)
		asked[k] = true
		switch d := r.Amount - held[k].Amount; {
		case d > 0:
			g := r
			g.Amount = d
			growth = append(growth, g)
		case d < 0:
			shrinks = true
		}
	}
	for k, h := range held {
		if !asked[k] && h.Amount > 0 {
			shrinks = true
		}
	}
	if !shrinks && len(growth) == 0 {
		st := StatusOf(own[len(own)-1])
		st.Phase, st.Message = Granted, "the owner's claims add up to what was asked"
		return st, nil
	}
	next := c.Claim(owner, consumer, requests)
	next.Name = fmt.Sprintf("%s-%d", c.Name(owner), c.indexOf(owner, last.Name)+1)
	next.Annotations = map[string]string{AnnotationTotal: want}
	if shrinks {
		next.Annotations[AnnotationReplaces] = "true"
	} else {
		next.Spec.Requests = growth
	}
	got, err := claims.Create(ctx, next, metav1.CreateOptions{FieldManager: c.Service})
	if apierrors.IsAlreadyExists(err) {
		if got, err = claims.Get(ctx, next.Name, metav1.GetOptions{}); err == nil {
			err = c.adoptable(got, next)
		}
	}
	if err != nil {
		return Status{}, err
	}
	return StatusOf(got), nil
}

// indexOf is the place of a claim named name among owner's: 0 for the claim
// Ensure made, n for <Name>-<n>, -1 for a name of another owner.
func (c *Claimer) indexOf(owner Owner, name string) int {
	base := c.Name(owner)
	if name == base {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimPrefix(name, base+"-"))
	if !strings.HasPrefix(name, base+"-") || err != nil || n < 1 {
		return -1
	}
	return n
}

func (c *Claimer) deleteClaim(ctx context.Context, cl *quotav1alpha1.ResourceClaim) error {
	uid := cl.UID
	err := c.Client.QuotaV1alpha1().ResourceClaims(cl.Namespace).Delete(ctx, cl.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("releasing claim %s: %w", types.NamespacedName{Namespace: cl.Namespace, Name: cl.Name}, err)
	}
	return nil
}

// cellKey names what a request draws from: its resource type and
// dimensions.
func cellKey(r quotav1alpha1.ResourceRequest) string {
	dims := make([]string, 0, len(r.Dimensions))
	for _, d := range r.Dimensions {
		dims = append(dims, d.Key+"="+d.Value)
	}
	slices.Sort(dims)
	return string(r.ResourceType) + "{" + strings.Join(dims, ",") + "}"
}

// totalKey is requests as one comparable string.
func totalKey(requests []quotav1alpha1.ResourceRequest) string {
	parts := make([]string, 0, len(requests))
	for _, r := range requests {
		parts = append(parts, cellKey(r)+"="+strconv.FormatInt(r.Amount, 10))
	}
	slices.Sort(parts)
	return strings.Join(parts, ";")
}
