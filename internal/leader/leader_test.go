package leader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func TestValidate(t *testing.T) {
	valid := Election{Namespace: "quotaplane-system", Lease: "l", Identity: "a",
		LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 2 * time.Second}
	cases := map[string]struct {
		change  func(*Election)
		wantErr string
	}{
		"valid":          {change: func(*Election) {}},
		"no namespace":   {change: func(e *Election) { e.Namespace = "" }, wantErr: "leader election needs a namespace, a Lease name and an identity"},
		"no Lease name":  {change: func(e *Election) { e.Lease = "" }, wantErr: "leader election needs a namespace, a Lease name and an identity"},
		"no identity":    {change: func(e *Election) { e.Identity = "" }, wantErr: "leader election needs a namespace, a Lease name and an identity"},
		"no retry":       {change: func(e *Election) { e.RetryPeriod = 0 }, wantErr: "retryPeriod must be greater than zero"},
		"renew too soon": {change: func(e *Election) { e.RenewDeadline = 2 * time.Second }, wantErr: "renewDeadline must be greater than retryPeriod*JitterFactor"},
		"lease too short": {
			change: func(e *Election) { e.LeaseDuration = 10 * time.Second }, wantErr: "leaseDuration must be greater than renewDeadline",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			e := valid
			tc.change(&e)
			gotErr := ""
			if err := e.Validate(); err != nil {
				gotErr = err.Error()
			}
			if diff := cmp.Diff(tc.wantErr, gotErr); diff != "" {
				t.Errorf("Validate (-want +got):\n%s", diff)
			}
		})
	}
}

// store is one Lease held in memory, written with compare-and-swap as the
// API server writes it (resourceVersion); refuse makes every write fail, as
// when the API server cannot be reached.
type store struct {
	mu      sync.Mutex
	record  *resourcelock.LeaderElectionRecord
	version int
	refuse  atomic.Bool
}

// lock is one replica's view of the store.
type lock struct {
	s        *store
	identity string
	seen     int
}

var _ resourcelock.Interface = &lock{}

func (l *lock) Get(context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	if l.s.record == nil {
		return nil, nil, apierrors.NewNotFound(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "l")
	}
	l.seen = l.s.version
	r := *l.s.record
	raw, err := json.Marshal(r)
	return &r, raw, err
}

func (l *lock) write(r resourcelock.LeaderElectionRecord, create bool) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	switch {
	case l.s.refuse.Load():
		return errors.New("the API server cannot be reached")
	case create && l.s.record != nil:
		return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "leases"}, "l")
	case !create && l.seen != l.s.version:
		return apierrors.NewConflict(schema.GroupResource{Resource: "leases"}, "l", errors.New("changed"))
	}
	l.s.record = &r
	l.s.version++
	l.seen = l.s.version
	return nil
}

func (l *lock) Create(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r, true)
}
func (l *lock) Update(_ context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.write(r, false)
}
func (l *lock) RecordEvent(string)      {}
func (l *lock) Identity() string        { return l.identity }
func (l *lock) Describe() string        { return "test/l" }
func noNamespace(context.Context) error { return nil }

// fastElection renews often; its Lease is one second long, the least a
// Lease records (leaseDurationSeconds).
func fastElection(identity string) Election {
	return Election{Namespace: "test", Lease: "l", Identity: identity,
		LeaseDuration: time.Second, RenewDeadline: 300 * time.Millisecond, RetryPeriod: 50 * time.Millisecond}
}

// terms records the terms of every replica and whether two overlapped.
type terms struct {
	mu       sync.Mutex
	leading  int
	overlaps int
	started  []string
}

func (tr *terms) begin(id string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.leading++
	if tr.leading > 1 {
		tr.overlaps++
	}
	tr.started = append(tr.started, id)
}

func (tr *terms) end() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.leading--
}

func TestCampaign(t *testing.T) {
	cases := map[string]struct {
		// lead is the controllers' run in the term-th term; s is the Lease.
		lead func(ctx context.Context, s *store, term int) error
		// replicas campaign for the Lease.
		replicas []string
		// wantTerms is the least number of terms begun, wantIdentities the
		// replicas that must have led at least once.
		wantTerms      int
		wantIdentities []string
	}{
		"a term lasts until the controllers fail; the Lease is given up and won again": {
			replicas: []string{"a", "b"},
			lead: func(ctx context.Context, _ *store, _ int) error {
				select {
				case <-ctx.Done():
				case <-time.After(100 * time.Millisecond):
				}
				return errors.New("controllers failed")
			},
			wantTerms: 3,
		},
		"a term ends when the Lease cannot be renewed, and the replica campaigns again": {
			replicas: []string{"a"},
			lead: func(ctx context.Context, s *store, term int) error {
				if term == 1 {
					s.refuse.Store(true)
					<-ctx.Done() // must end within RenewDeadline
					s.refuse.Store(false)
					return nil
				}
				<-ctx.Done()
				return nil
			},
			wantTerms:      2,
			wantIdentities: []string{"a"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := &store{}
			tr := &terms{}
			ctx, cancel := context.WithCancel(context.Background())
			var done sync.WaitGroup
			var count atomic.Int32
			for _, id := range tc.replicas {
				done.Add(1)
				go func() {
					defer done.Done()
					campaign(ctx, fastElection(id), "test controllers", func(ctx context.Context) error {
						tr.begin(id)
						defer tr.end()
						return tc.lead(ctx, s, int(count.Add(1)))
					}, noNamespace, &lock{s: s, identity: id})
				}()
			}
			deadline := time.Now().Add(5 * time.Second)
			for int(count.Load()) < tc.wantTerms && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			cancel()
			returned := make(chan struct{})
			go func() { done.Wait(); close(returned) }()
			select {
			case <-returned:
			case <-time.After(5 * time.Second):
				t.Fatal("Campaign did not return after its context ended")
			}
			// Campaign returns only after its controllers have.
			tr.mu.Lock()
			defer tr.mu.Unlock()
			if tr.leading != 0 {
				t.Errorf("%d terms still running after Campaign returned", tr.leading)
			}
			if tr.overlaps != 0 {
				t.Errorf("two replicas led at once %d times (terms %v)", tr.overlaps, tr.started)
			}
			if len(tr.started) < tc.wantTerms {
				t.Errorf("terms %v, want at least %d", tr.started, tc.wantTerms)
			}
			for _, id := range tc.wantIdentities {
				if !contains(tr.started, id) {
					t.Errorf("terms %v, want %s among the leaders", tr.started, id)
				}
			}
			if s.record != nil && s.record.HolderIdentity != "" {
				t.Errorf("the Lease is still held by %q after every replica stopped; want it released", s.record.HolderIdentity)
			}
		})
	}
}

func contains(ids []string, id string) bool {
	for _, i := range ids {
		if i == id {
			return true
		}
	}
	return false
}

// TestErrStopEndsTheCampaign: a term whose controllers must never run here
// (ErrStop) gives the Lease up and ends the campaign with that error, instead
// of campaigning again.
func TestErrStopEndsTheCampaign(t *testing.T) {
	s := &store{}
	terms := 0
	fatal := fmt.Errorf("%w: this store belongs to another engine", ErrStop)
	done := make(chan error, 1)
	go func() {
		done <- campaign(context.Background(), fastElection("a"), "test controllers", func(context.Context) error {
			terms++
			return fatal
		}, noNamespace, &lock{s: s, identity: "a"})
	}()
	select {
	case err := <-done:
		if !errors.Is(err, ErrStop) || terms != 1 {
			t.Errorf("campaign returned %v after %d terms; want the stop error after 1", err, terms)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the campaign went on after ErrStop")
	}
}
