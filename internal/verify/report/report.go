package report

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/quotaplane/quotaplane/internal/engine/formats"
)

// Exit codes of quotaplane verify.
const (
	// ExitClean: nothing was found.
	ExitClean = 0
	// ExitDiscrepancies: at least one discrepancy was found.
	ExitDiscrepancies = 1
	// ExitCannotRun: the audit could not run (bad flags, the API server or
	// etcd unreachable, a list refused); nothing was judged.
	ExitCannotRun = 2
)

// ExitCode is the exit code of a run that returned report and err.
func ExitCode(report *Report, err error) int {
	switch {
	case err != nil || report == nil:
		return ExitCannotRun
	case len(report.Discrepancies) > 0:
		return ExitDiscrepancies
	default:
		return ExitClean
	}
}

// Check names the kind of a discrepancy.
type Check string

const (
	// CheckUnclaimedObject: a stored object that a Ready, enabled
	// ClaimCreationPolicy governs has no granted claim of that policy.
	CheckUnclaimedObject Check = "unclaimed-object"
	// CheckOrphanClaim: a claim names an object (by UID) that is not stored.
	CheckOrphanClaim Check = "orphan-claim"
	// CheckBucketMismatch: an AllowanceBucket's limit or allocated is not
	// what the stored grants and claims give.
	CheckBucketMismatch Check = "bucket-mismatch"
	// CheckBucketMissing: the stored grants and claims give a bucket that is
	// not stored.
	CheckBucketMissing Check = "bucket-missing"
	// CheckBucketStale: a stored bucket that no grant or claim gives, or that
	// is not where the engine keeps it.
	CheckBucketStale Check = "bucket-stale"
	// CheckInFlightOverdue: a grant is held in flight (admission's journal,
	// or the engine's ledger) past the time its claim should have been
	// written or the grant released.
	CheckInFlightOverdue Check = "inflight-overdue"
	// CheckJournalUnreadable: a key of admission's journal cannot be decoded;
	// the next engine leader cannot start its term.
	CheckJournalUnreadable Check = "journal-unreadable"
	// CheckPlaneConsumer: a claim of an object stored in a control plane
	// charges a consumer of a kind each plane stores for itself (a
	// Namespace): the root's of that name, which the plane's object is not
	// (docs/kinds.md, "Consumers across planes").
	CheckPlaneConsumer Check = "plane-consumer"
	// CheckConsumerMissing: grants (or claims) name an Organization or a
	// Project that does not exist, so their buckets cannot be stored. Only a
	// person can repair it (correct the grant, create the consumer, or
	// delete the grant).
	CheckConsumerMissing Check = "consumer-missing"
	// CheckUnevaluableObject: a stored object an enforcing
	// ClaimCreationPolicy matches cannot be evaluated by it (a field the
	// policy reads is missing, say), so it holds no claim — stored while
	// the policy did not enforce. Only a person can repair it: its next
	// write is refused until it gives the policy what it reads, and is then
	// charged (docs/exactly-once.md, "Rollout modes").
	CheckUnevaluableObject Check = "unevaluable-object"
)

// Discrepancy is one place where storage disagrees with itself.
type Discrepancy struct {
	Check Check `json:"check"`
	// ID identifies the discrepancy across readings (check and objects).
	ID string `json:"id"`
	// Problem names the objects involved and what is wrong.
	Problem string `json:"problem"`
	// Repair says what would repair it.
	Repair string `json:"repair"`
	// Target is the object the repair acts on, when it acts on one: the
	// policy that charges an unclaimed object, an orphan claim, a stale
	// bucket. Repairs without a target are a new engine term.
	Target *Target `json:"target,omitempty"`
}

// Target names an object a repair acts on.
type Target struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid,omitempty"`
}

// FailOpen is an object admitted without its claims because its policies
// are fail-open: listed apart, not damage.
type FailOpen struct {
	formats.FailOpenRecord
	// Key is the etcd key of the record.
	Key string `json:"key"`
	// Unreadable is set, with the error, when the record cannot be decoded.
	Unreadable string `json:"unreadable,omitempty"`
}

// PolicyStats say what one policy's check saw.
type PolicyStats struct {
	Name string `json:"name"`
	// Trigger is the kind the policy charges, as apiVersion/kind.
	Trigger string `json:"trigger"`
	// Enforced: Ready and enabled. Only enforced policies are checked.
	Enforced bool `json:"enforced"`
	// NotEnforced says why, when not enforced.
	NotEnforced string `json:"notEnforced,omitempty"`

	// Objects of the trigger kind looked at.
	Objects int `json:"objects"`
	// BeforePolicy were created before the policy and not judged: the
	// engine has not yet charged the existing objects of the enforced
	// generation (status.existingObjects).
	BeforePolicy int `json:"beforePolicy"`
	// Ambiguous were created in the same second as the policy: skipped.
	Ambiguous int `json:"ambiguous"`
	// Deleting are being deleted: skipped.
	Deleting int `json:"deleting"`
	// NotJudged: the constraints read user or requestInfo, which a stored
	// object does not carry, or could not be evaluated.
	NotJudged int `json:"notJudged"`
	// Unevaluable: the policy matches them and cannot be evaluated for
	// them (CheckUnevaluableObject).
	Unevaluable int `json:"unevaluable,omitempty"`
	// NotGoverned: a constraint is false, or every request of the claim
	// renders 0 (nothing to charge).
	NotGoverned int `json:"notGoverned"`
	// Exempt are in a namespace no policy charges (the system namespace,
	// --quota-exempt-namespaces), or of a kind none charges (Events).
	Exempt int `json:"exempt"`
	// Governed objects, and how each is accounted for.
	Governed  int `json:"governed"`
	Claimed   int `json:"claimed"`
	InFlight  int `json:"inFlight"`
	FailOpen  int `json:"failOpen"`
	Unclaimed int `json:"unclaimed"`
}

// Counts say how much was read.
type Counts struct {
	Claims int `json:"claims"`
	// AdmissionClaims name an object (the resource-uid annotation).
	AdmissionClaims int `json:"admissionClaims"`
	// EarlierGeneration claims were computed by an earlier generation of
	// their policy; UnknownGeneration claims do not say which.
	EarlierGeneration int `json:"earlierGeneration"`
	UnknownGeneration int `json:"unknownGeneration"`
	Registrations     int `json:"registrations"`
	Grants            int `json:"grants"`
	StoredBuckets     int `json:"storedBuckets"`
	ExpectedBuckets   int `json:"expectedBuckets"`
	// JournalGrants are admission's grants in etcd; LedgerGrants the
	// engine's in-flight grants in its ledger.
	JournalGrants int `json:"journalGrants"`
	LedgerGrants  int `json:"ledgerGrants"`
}

// Report is the outcome of an audit.
type Report struct {
	// Discrepancies found (in both readings when rechecked), in a stable order.
	Discrepancies []Discrepancy `json:"discrepancies"`
	// FailOpen objects, listed apart.
	FailOpen []FailOpen     `json:"failOpen"`
	Policies []*PolicyStats `json:"policies"`
	Counts   Counts         `json:"counts"`
	Leader   string         `json:"leader"`
	// Etcd is the etcd the journal and fail-open records were read from;
	// empty when none was given and they were not checked.
	Etcd    string          `json:"etcd"`
	Recheck *RecheckSummary `json:"recheck,omitempty"`
	Notes   []string        `json:"notes,omitempty"`
	Took    time.Duration   `json:"took"`
	seen    map[string]bool // discrepancy IDs, to keep the first
}

// RecheckSummary says how the second reading changed the first.
type RecheckSummary struct {
	After time.Duration `json:"after"`
	// First is how many discrepancies the first reading found; the report
	// keeps those the second found again.
	First int `json:"first"`
}

func New() *Report {
	return &Report{Discrepancies: []Discrepancy{}, FailOpen: []FailOpen{}, seen: map[string]bool{}}
}

func (r *Report) Add(d Discrepancy) {
	if r.seen[d.ID] {
		return
	}
	r.seen[d.ID] = true
	r.Discrepancies = append(r.Discrepancies, d)
}

func (r *Report) Note(format string, args ...any) {
	r.Notes = append(r.Notes, fmt.Sprintf(format, args...))
}

// KeepOnly drops the discrepancies the earlier reading did not find.
func (r *Report) KeepOnly(earlier *Report) {
	kept := r.Discrepancies[:0]
	for _, d := range r.Discrepancies {
		if earlier.seen[d.ID] {
			kept = append(kept, d)
		}
	}
	r.Discrepancies = kept
}

func (r *Report) Sort() {
	sort.SliceStable(r.Discrepancies, func(i, j int) bool {
		if r.Discrepancies[i].Check != r.Discrepancies[j].Check {
			return r.Discrepancies[i].Check < r.Discrepancies[j].Check
		}
		return r.Discrepancies[i].ID < r.Discrepancies[j].ID
	})
	sort.Slice(r.FailOpen, func(i, j int) bool { return r.FailOpen[i].Key < r.FailOpen[j].Key })
	sort.Slice(r.Policies, func(i, j int) bool { return r.Policies[i].Name < r.Policies[j].Name })
}

// Print writes the report for a person: each discrepancy with its repair,
// the fail-open objects apart, then a summary.
func (r *Report) Print(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format, args...) }
	for _, d := range r.Discrepancies {
		p("%s: %s\n    to repair: %s\n\n", d.Check, d.Problem, d.Repair)
	}
	if len(r.FailOpen) > 0 {
		p("Admitted fail-open (without claims, because their policies are fail-open; not damage): %d\n", len(r.FailOpen))
		for _, f := range r.FailOpen {
			if f.Unreadable != "" {
				p("  %s: unreadable record: %s\n", f.Key, f.Unreadable)
				continue
			}
			p("  %s (uid %s), %s, policies %s: %s\n", describeRecord(f.FailOpenRecord), f.UID, f.Time, strings.Join(f.Policies, ", "), f.Reason)
		}
		p("\n")
	}
	p("Summary\n")
	for _, ps := range r.Policies {
		if !ps.Enforced {
			p("  ClaimCreationPolicy %s on %s: not checked (%s)\n", ps.Name, ps.Trigger, ps.NotEnforced)
			continue
		}
		p("  ClaimCreationPolicy %s on %s: %d objects; %d governed (%d claimed, %d in flight, %d fail-open, %d unclaimed); %d not governed, %d exempt, %d created before the policy; skipped: %d not judged, %d created in the policy's second, %d being deleted\n",
			ps.Name, ps.Trigger, ps.Objects, ps.Governed, ps.Claimed, ps.InFlight, ps.FailOpen, ps.Unclaimed,
			ps.NotGoverned, ps.Exempt, ps.BeforePolicy, ps.NotJudged, ps.Ambiguous, ps.Deleting)
		if ps.Unevaluable > 0 {
			p("    %d it cannot be evaluated for (unevaluable-object)\n", ps.Unevaluable)
		}
	}
	c := r.Counts
	p("  %d registrations, %d grants, %d claims (%d made for objects: %d computed by an earlier policy generation, %d without a generation)\n",
		c.Registrations, c.Grants, c.Claims, c.AdmissionClaims, c.EarlierGeneration, c.UnknownGeneration)
	p("  %d buckets stored, %d given by the grants and claims\n", c.StoredBuckets, c.ExpectedBuckets)
	if r.Etcd != "" {
		p("  grants in flight: %d in the engine's ledger, %d in admission's journal (etcd %s)\n", c.LedgerGrants, c.JournalGrants, r.Etcd)
	} else {
		p("  grants in flight: %d in the engine's ledger; admission's journal and fail-open records: NOT CHECKED (no --etcd-servers or --data-dir)\n", c.LedgerGrants)
	}
	p("  engine leader: %s\n", r.Leader)
	if r.Recheck != nil {
		p("  read twice, %s apart: %d of the first reading's %d discrepancies were found again (the others were changes in progress)\n",
			r.Recheck.After, len(r.Discrepancies), r.Recheck.First)
	}
	for _, n := range r.Notes {
		p("  note: %s\n", n)
	}
	p("  took %s\n", r.Took.Round(time.Millisecond))
	if len(r.Discrepancies) == 0 {
		p("\nNo discrepancies.\n")
		return
	}
	byCheck := map[Check]int{}
	for _, d := range r.Discrepancies {
		byCheck[d.Check]++
	}
	var parts []string
	for _, ch := range []Check{CheckUnclaimedObject, CheckUnevaluableObject, CheckOrphanClaim, CheckBucketMismatch, CheckBucketMissing, CheckBucketStale, CheckInFlightOverdue, CheckJournalUnreadable} {
		if byCheck[ch] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", ch, byCheck[ch]))
		}
	}
	p("\n%d discrepancies: %s\n", len(r.Discrepancies), strings.Join(parts, ", "))
}

func describeRecord(f formats.FailOpenRecord) string {
	res := f.Resource
	if i := strings.Index(res, "."); i > 0 {
		res = res[:i]
	}
	return res + " " + NSName(f.Namespace, f.Name)
}

func NSName(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
