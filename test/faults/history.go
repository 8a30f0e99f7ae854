package faults

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Result is what a client made of one operation.
type Result string

const (
	// OK: the server said it was done.
	OK Result = "ok"
	// Refused: the server said it was not done (a quota denial, a
	// conflict, a retryable refusal such as 504 "cannot be decided").
	Refused Result = "refused"
	// Unknown: no answer (a timeout, a connection cut): done or not.
	Unknown Result = "unknown"
)

// Op is one operation of the history.
type Op struct {
	Kind    string // create, update, delete
	Name    string
	Replica int
	Start   time.Duration // since the load began
	Took    time.Duration
	Result  Result
	// Why is the refusal's or unknown's kind, for the report.
	Why string
	// Err is the error's text, when there was one.
	Err string
}

// History is every operation of a run, in no particular order.
type History struct {
	mu  sync.Mutex
	ops []Op
}

func (h *History) add(op Op) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ops = append(h.ops, op)
}

// Ops returns the operations recorded so far.
func (h *History) Ops() []Op {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.ops)
}

// record sets the operation's result from the client's error.
func (op *Op) record(err error) {
	op.Result, op.Why = classify(err)
	if err != nil {
		op.Err = err.Error()
	}
}

// classify turns a client's error into the operation's result.
func classify(err error) (Result, string) {
	var netErr net.Error
	switch {
	case err == nil:
		return OK, ""
	case apierrors.IsForbidden(err):
		return Refused, "quota"
	case apierrors.IsConflict(err), apierrors.IsAlreadyExists(err):
		return Refused, "conflict"
	case apierrors.IsNotFound(err):
		return Refused, "not found"
	case apierrors.IsTimeout(err) && strings.Contains(err.Error(), "cannot be decided right now"):
		// The server said nothing was consumed and nothing stored.
		return Refused, "not decided (504)"
	case apierrors.IsTooManyRequests(err):
		return Refused, "too many requests"
	case apierrors.IsTimeout(err), apierrors.IsServerTimeout(err):
		return Unknown, "timeout"
	case errors.As(err, &netErr), errors.Is(err, context.DeadlineExceeded):
		return Unknown, "connection"
	case apierrors.IsInternalError(err), apierrors.IsServiceUnavailable(err):
		return Unknown, "server error"
	}
	return Unknown, "other: " + err.Error()
}

// Load is a steady stream of governed writes: each worker creates Secrets
// under the policy, charged to the levels' projects in turn, resizes none (a
// Secret's charge is its count) but updates their labels, and deletes some,
// each request sent to the next replica in turn.
type Load struct {
	Clients []client.Client
	Levels  *Levels
	Workers int
	// Pace is the pause between a worker's operations.
	Pace time.Duration
	// Timeout bounds one operation (the client's own timeout).
	Timeout time.Duration
}

// Run runs the load until ctx ends, and returns its history.
func (l Load) Run(ctx context.Context) *History {
	h := &History{}
	began := time.Now()
	var wg sync.WaitGroup
	for w := range l.Workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), uint64(began.UnixNano())))
			var mine []string
			for n := 0; ctx.Err() == nil; n++ {
				r := (w + n) % len(l.Clients)
				c := l.Clients[r]
				op := Op{Replica: r, Start: time.Since(began)}
				octx, cancel := context.WithTimeout(context.Background(), l.Timeout)
				var err error
				switch roll := rng.IntN(10); {
				case roll < 6 || len(mine) == 0:
					op.Kind, op.Name = "create", fmt.Sprintf("w%d-%d", w, n)
					err = c.Create(octx, l.Levels.secret(op.Name, l.Levels.Projects[(w+n)%len(l.Levels.Projects)]))
					if res, _ := classify(err); res != Refused {
						mine = append(mine, op.Name)
					}
				case roll < 8:
					op.Kind, op.Name = "update", mine[rng.IntN(len(mine))]
					patch := fmt.Appendf(nil, `{"metadata":{"labels":{"n":"%d"}}}`, n)
					err = c.Patch(octx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: op.Name, Namespace: l.Levels.NS}}, client.RawPatch("application/merge-patch+json", patch))
				default:
					i := rng.IntN(len(mine))
					op.Kind, op.Name = "delete", mine[i]
					err = c.Delete(octx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: op.Name, Namespace: l.Levels.NS}})
					mine = slices.Delete(mine, i, i+1)
				}
				cancel()
				op.Took = time.Since(began) - op.Start
				op.record(err)
				h.add(op)
				select {
				case <-ctx.Done():
				case <-time.After(l.Pace):
				}
			}
		})
	}
	wg.Wait()
	return h
}

// Summary is what clients saw, by operation kind.
type Summary struct {
	Ops                 int
	ByResult            map[Result]int
	ByWhy               map[string]int
	P50, P99, Longest   time.Duration
	LongestAt           time.Duration
	CreatesOK, Refusals int
	// Blip is the longest time in which no governed write succeeded
	// anywhere (between two successive ok creates or updates): what a
	// fault cost the cluster as a whole.
	Blip, BlipAt time.Duration
}

// Summarize reports latencies and results of ops.
func Summarize(ops []Op) Summary {
	s := Summary{Ops: len(ops), ByResult: map[Result]int{}, ByWhy: map[string]int{}}
	var took []time.Duration
	for _, op := range ops {
		s.ByResult[op.Result]++
		if op.Why != "" {
			s.ByWhy[op.Kind+": "+op.Why]++
		}
		took = append(took, op.Took)
		if op.Took > s.Longest {
			s.Longest, s.LongestAt = op.Took, op.Start
		}
		if op.Kind == "create" && op.Result == OK {
			s.CreatesOK++
		}
	}
	var ends []time.Duration
	for _, op := range ops {
		if op.Result == OK && op.Kind != "delete" {
			ends = append(ends, op.Start+op.Took)
		}
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	for i := 1; i < len(ends); i++ {
		if gap := ends[i] - ends[i-1]; gap > s.Blip {
			s.Blip, s.BlipAt = gap, ends[i-1]
		}
	}
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	if len(took) > 0 {
		s.P50, s.P99 = took[len(took)/2], took[len(took)*99/100]
	}
	return s
}

func (s Summary) String() string {
	var why []string
	for k, n := range s.ByWhy {
		why = append(why, fmt.Sprintf("%s %d", k, n))
	}
	sort.Strings(why)
	return fmt.Sprintf("%d ops (ok %d, refused %d, unknown %d); p50 %s, p99 %s, longest %s (at %s); no governed write succeeded for %s (from %s); %s",
		s.Ops, s.ByResult[OK], s.ByResult[Refused], s.ByResult[Unknown], s.P50.Round(time.Millisecond), s.P99.Round(time.Millisecond),
		s.Longest.Round(time.Millisecond), s.LongestAt.Round(time.Second), s.Blip.Round(time.Millisecond), s.BlipAt.Round(100*time.Millisecond), strings.Join(why, ", "))
}
