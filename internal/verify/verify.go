package verify

import (
	"context"
	"strings"
	"time"

	"github.com/quotaplane/quotaplane/internal/verify/report"
)

// Run audits the plane o names and returns what it found. An error means
// the audit could not run (ExitCannotRun); discrepancies are in the report.
//
// The plane is live: a create admitted between two of the reads, or a
// bucket written 100 ms after its claim, looks like damage for a moment. So
// when the first reading finds discrepancies, Run reads everything again
// after o.RecheckAfter and reports only those found both times.
func Run(ctx context.Context, o Options) (*Report, error) {
	began := time.Now()
	o, err := o.complete()
	if err != nil {
		return nil, err
	}
	v, err := connect(ctx, o)
	if err != nil {
		return nil, err
	}
	defer v.close()

	report, err := v.read(ctx)
	if err != nil {
		return nil, err
	}
	if len(report.Discrepancies) > 0 && o.RecheckAfter > 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(o.RecheckAfter):
		}
		second, err := v.read(ctx)
		if err != nil {
			return nil, err
		}
		second.KeepOnly(report)
		second.Recheck = &RecheckSummary{After: o.RecheckAfter, First: len(report.Discrepancies)}
		report = second
	}
	report.Sort()
	report.Took = time.Since(began)
	return report, nil
}

// read is one reading of the whole plane. It reads in the order a new
// engine leader does: what is held in flight first (the ledger, then
// admission's journal), then the quota objects, so that a grant whose claim
// is written in between is seen as its claim rather than not at all. It
// compares the buckets right after, to keep that window short, and only
// then lists the objects the policies govern and the claims name.
func (v *verifier) read(ctx context.Context) (*Report, error) {
	r := report.New()
	s := newReading()
	leader, leads, err := v.leader(ctx)
	if err != nil {
		return nil, err
	}
	r.Leader = leader
	if !leads {
		r.Note("no engine replica leads: buckets are not being written and grants in flight are not being settled")
	}
	if v.etcd != nil {
		r.Etcd = strings.Join(v.o.EtcdServers, ",")
	}

	if err := v.readProjects(ctx, s); err != nil {
		return nil, err
	}
	if err := v.readPolicies(ctx, s, r); err != nil {
		return nil, err
	}
	if err := v.readLedger(ctx, s); err != nil {
		return nil, err
	}
	if err := v.readJournal(ctx, s, r); err != nil {
		return nil, err
	}
	if err := v.readQuota(ctx, s, r); err != nil {
		return nil, err
	}

	if err := v.checkBuckets(ctx, s, r); err != nil {
		return nil, err
	}
	if err := v.checkGovernedObjects(ctx, s, r); err != nil {
		return nil, err
	}
	if err := v.checkClaimedObjects(ctx, s, r); err != nil {
		return nil, err
	}
	v.checkInFlight(s, r)
	listFailOpen(s, r)
	return r, nil
}
