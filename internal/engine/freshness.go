package engine

import (
	"context"
	"strconv"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/klog/v2"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
)

// grantFreshness makes a claim's first denial wait until the engine has
// seen every grant written before the claim: a claim created right after
// its grant is never refused "limit 0" because the grants' watch had not
// delivered the grant yet (it would be granted a moment later, when it
// arrives, and the service would have seen a refusal it did not deserve).
//
// The engine knows the highest resourceVersion its grants' watch has
// delivered (seen). A quorum list of the grants, made after the claim was
// stored, holds every grant written before it; once the watch has
// delivered each listed grant's version, every grant written up to the
// list's resourceVersion is known (fresh). A first denial of a claim
// stored at or before fresh is written at once; a later one waits for the
// next list (one at a time, shared by every claim waiting), then is
// written as the engine then decides it — Granted, if the grant arrived.
// Grants and claims share one etcd, so their resourceVersions are
// comparable.
type grantFreshness struct {
	md metadata.Interface
	// requeue writes a claim's decision again.
	requeue func(uid string)

	mu       sync.Mutex
	seen     uint64
	fresh    uint64
	held     map[string]uint64
	checking bool
}

// freshnessWait bounds how long a check waits for the grants' watch to
// deliver what the list showed; past it the denials are written anyway.
const freshnessWait = 5 * time.Second

var grantsResource = schema.GroupVersionResource{Group: quotav1alpha1.GroupName, Version: "v1alpha1", Resource: "resourcegrants"}

func parseRV(rv string) uint64 {
	n, _ := strconv.ParseUint(rv, 10, 64)
	return n
}

// observed is told of each resourceVersion the grants' watch delivers (and
// of its list's).
func (f *grantFreshness) observed(rv string) {
	n := parseRV(rv)
	f.mu.Lock()
	defer f.mu.Unlock()
	if n > f.seen {
		f.seen = n
	}
}

// denialReady reports whether the first denial of claim uid, stored at
// resourceVersion rv, may be written now. When not, the claim is held and
// requeued once the grants are known to be as new as it.
func (f *grantFreshness) denialReady(ctx context.Context, uid, rv string) bool {
	n := parseRV(rv)
	f.mu.Lock()
	defer f.mu.Unlock()
	if n == 0 || n <= f.fresh {
		return true
	}
	if f.held == nil {
		f.held = map[string]uint64{}
	}
	f.held[uid] = n
	if !f.checking {
		f.checking = true
		go f.check(ctx)
	}
	return false
}

// check lists the grants (a quorum read), waits until the watch delivered
// each listed version, and releases the held claims the list covers;
// again while claims newer than the list wait.
func (f *grantFreshness) check(ctx context.Context) {
	logger := klog.FromContext(ctx)
	for ctx.Err() == nil {
		list, err := f.md.Resource(grantsResource).List(ctx, metav1.ListOptions{})
		var listed, newest uint64
		if err != nil {
			logger.Error(err, "Listing the grants to know the engine has seen every grant a new claim may need; writing its denial anyway")
		} else {
			listed = parseRV(list.ResourceVersion)
			for i := range list.Items {
				newest = max(newest, parseRV(list.Items[i].ResourceVersion))
			}
			f.waitSeen(ctx, newest)
		}
		var release []string
		f.mu.Lock()
		if listed > f.fresh {
			f.fresh = listed
		}
		for uid, rv := range f.held {
			if err != nil || rv <= f.fresh {
				release = append(release, uid)
				delete(f.held, uid)
			}
		}
		done := len(f.held) == 0
		if done {
			f.checking = false
		}
		f.mu.Unlock()
		for _, uid := range release {
			f.requeue(uid)
		}
		if done {
			return
		}
	}
}

// waitSeen waits, at most freshnessWait, until the watch delivered rv.
func (f *grantFreshness) waitSeen(ctx context.Context, rv uint64) {
	deadline := time.Now().Add(freshnessWait)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		f.mu.Lock()
		seen := f.seen
		f.mu.Unlock()
		if seen >= rv {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	klog.FromContext(ctx).Info("The grants' watch has not delivered a grant a quorum read shows; writing waiting denials anyway", "resourceVersion", rv, "waited", freshnessWait)
}
