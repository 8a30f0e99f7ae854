package cache

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/internal/quota"
	"github.com/quotaplane/quotaplane/internal/quota/accounting"
)

func limit(c *Cache) int64 {
	var l int64
	c.Read(func(acc *accounting.Accounts) {
		st, _ := acc.Bucket(quota.BucketID{Consumer: quota.ConsumerID{APIGroup: orgRef.APIGroup, Kind: orgRef.Kind, Name: orgRef.Name}, ResourceType: "x.io/widgets"})
		l = st.Limit
	})
	return l
}

func windowed(from, until *metav1.Time, onGrant quotav1alpha1.GrantWindowPhase) *quotav1alpha1.ResourceGrant {
	g := &quotav1alpha1.ResourceGrant{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w"},
		Spec: quotav1alpha1.ResourceGrantSpec{ConsumerRef: orgRef, ValidFrom: from, ExpiresAt: until,
			Allowances: []quotav1alpha1.Allowance{{ResourceType: "x.io/widgets", Buckets: []quotav1alpha1.GrantBucket{{Amount: 5}}}}}}
	if onGrant != "" {
		g.Status.Window = &quotav1alpha1.GrantWindowStatus{Phase: onGrant, ValidFrom: from, ExpiresAt: until}
	}
	return g
}

// TestAWindowCountsOnlyOnceRecorded: a grant whose start has passed counts
// only after the start is in the ledger's record (WindowsDue, then
// ApplyWindows once the ledger is written); its expiry likewise stops it
// only once recorded; the record leaves the ledger once the grant shows it.
func TestAWindowCountsOnlyOnceRecorded(t *testing.T) {
	c := world(t, 2, nil, true)
	now := time.Now()
	from, until := metav1.NewTime(now.Add(-time.Minute)), metav1.NewTime(now.Add(time.Hour))
	c.GrantChanged(windowed(&from, &until, ""))
	if l := limit(c); l != 2 {
		t.Fatalf("a started window not yet recorded counts: limit %d, want 2", l)
	}
	if !c.WindowsDue(now) {
		t.Fatal("the start is not due")
	}
	if st := c.InflightRecord(); st.Windows["w"].Phase != "Active" {
		t.Fatalf("the ledger's next record lacks the start: %+v", st.Windows)
	}
	if l := limit(c); l != 2 {
		t.Fatalf("counted before ApplyWindows (the ledger's write): limit %d", l)
	}
	// The grant changes while its start is being written: still not
	// counted until the write succeeded.
	c.GrantChanged(windowed(&from, &until, ""))
	if l := limit(c); l != 2 {
		t.Fatalf("a grant changed while its start was being recorded counts before the record: limit %d", l)
	}
	c.ApplyWindows()
	if l := limit(c); l != 7 {
		t.Fatalf("after the start was recorded: limit %d, want 7", l)
	}
	if c.WindowsDue(now.Add(time.Minute)) {
		t.Fatal("something due again before the expiry")
	}
	// The grant shows Active: the record leaves the ledger.
	c.GrantChanged(windowed(&from, &until, quotav1alpha1.GrantWindowActive))
	if st := c.InflightRecord(); len(st.Windows) != 0 {
		t.Fatalf("the record stays in the ledger after the grant shows it: %+v", st.Windows)
	}
	// The expiry: due once the clock passes it, applied once recorded.
	if !c.WindowsDue(now.Add(2 * time.Hour)) {
		t.Fatal("the expiry is not due")
	}
	if l := limit(c); l != 7 {
		t.Fatalf("stopped before the expiry was recorded: limit %d", l)
	}
	c.ApplyWindows()
	if l := limit(c); l != 2 {
		t.Fatalf("after the expiry: limit %d, want 2", l)
	}
}

// TestALaterLeaderHonoursTheRecord: a new leader whose clock is an hour
// behind an expiry recorded in the ledger (or shown on the grant) does not
// count the grant, and never moves it back.
func TestALaterLeaderHonoursTheRecord(t *testing.T) {
	now := time.Now()
	from, until := metav1.NewTime(now.Add(-2*time.Hour)), metav1.NewTime(now.Add(-time.Minute))
	behind := now.Add(-time.Hour)
	for name, setUp := range map[string]func(c *Cache) *quotav1alpha1.ResourceGrant{
		"in the ledger": func(c *Cache) *quotav1alpha1.ResourceGrant {
			c.RestoreWindows(map[string]formats.WindowRecord{"w": {Phase: "Expired", From: from.Time, Until: until.Time}})
			return windowed(&from, &until, quotav1alpha1.GrantWindowActive)
		},
		"on the grant": func(*Cache) *quotav1alpha1.ResourceGrant {
			return windowed(&from, &until, quotav1alpha1.GrantWindowExpired)
		},
	} {
		t.Run(name, func(t *testing.T) {
			c := world(t, 2, nil, true)
			c.GrantChanged(setUp(c))
			if l := limit(c); l != 2 {
				t.Fatalf("an expiry recorded %s counts again: limit %d, want 2", name, l)
			}
			if c.WindowsDue(behind) {
				t.Fatal("a clock behind the expiry records something")
			}
			c.ApplyWindows()
			if l := limit(c); l != 2 {
				t.Fatalf("limit %d after a clock behind, want 2", l)
			}
		})
	}
	// A record for another window (the grant's expiry was moved later)
	// does not apply: the new window is judged on its own.
	c := world(t, 2, nil, true)
	c.RestoreWindows(map[string]formats.WindowRecord{"w": {Phase: "Expired", From: from.Time, Until: until.Time}})
	later := metav1.NewTime(now.Add(time.Hour))
	c.GrantChanged(windowed(&from, &later, ""))
	if !c.WindowsDue(now) {
		t.Fatal("the extended window's start is not due")
	}
	c.ApplyWindows()
	if l := limit(c); l != 7 {
		t.Fatalf("an extended grant: limit %d, want 7", l)
	}
}
