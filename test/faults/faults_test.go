package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/engine/formats"
	"github.com/quotaplane/quotaplane/test/etcdcluster"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// The timings of the test replicas (quotatest.StartReplica): the engine's
// Lease lasts 3 s, renewed within 2 s; requests are cut at 10 s
// (--request-timeout), so a grant whose request's end is unknown is held
// 20 s (the default: 60 s and 70 s). A request a follower forwards when the
// leader stops has 10 s for the Lease to pass (3 s) and the new leader to
// rebuild; at 5 s, the whole of the leader-paused case's bursts timed out in
// CI while other packages loaded the machine.
const (
	// The organization's limit is less than its projects' together, and
	// the first project's fills first: both levels refuse.
	orgLimit       = 30
	requestTimeout = 10 * time.Second
	holdPeriod     = requestTimeout + 10*time.Second
	warmup         = 2 * time.Second
	pause          = 5 * time.Second // longer than the 3 s Lease
	after          = 3 * time.Second
	holdWait       = holdPeriod + 30*time.Second // rechecks and slack
)

// cluster is three serve replicas on a three-member etcd cluster, each
// member its own process.
type cluster struct {
	// t is the running subtest; top the test, which owns the processes.
	t, top   *testing.T
	bin, url string
	etcd     *etcdcluster.Cluster
	replicas []*quotatest.Replica
}

func newCluster(t *testing.T) *cluster {
	etcd := etcdcluster.Start(t, 3)
	c := &cluster{t: t, top: t, bin: quotatest.BuildBinary(t), etcd: etcd, url: etcd.Endpoints()}
	for _, name := range []string{"a", "b", "c"} {
		c.replicas = append(c.replicas, quotatest.StartReplica(t, c.bin, name, c.url, "--request-timeout", requestTimeout.String()))
	}
	return c
}

// leader is the index of the replica whose engine leads.
func (c *cluster) leader(ctx context.Context) int {
	c.t.Helper()
	ns := engine.DefaultOptions().SystemNamespace
	idx := -1
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, r := range c.replicas {
			l, err := r.Client.CoordinationV1().Leases(ns).Get(ctx, "quotaplane-quota-engine", metav1.GetOptions{})
			if err != nil || l.Spec.HolderIdentity == nil {
				continue
			}
			for i, rr := range c.replicas {
				if rr.Identity == *l.Spec.HolderIdentity && time.Since(l.Spec.RenewTime.Time) < 3*time.Second {
					idx = i
					return true, nil
				}
			}
		}
		return false, nil
	})
	if err != nil {
		c.t.Fatal("no replica leads the engine")
	}
	return idx
}

func (c *cluster) clients() []client.Client {
	var out []client.Client
	for _, r := range c.replicas {
		cfg := *r.Config
		cfg.QPS, cfg.Burst = 500, 1000
		cfg.Timeout = 0 // each operation's own context bounds it
		out = append(out, quotatest.NewClient(c.t, &cfg))
	}
	return out
}

// fault is injected into the cluster at warmup, and undone after pause (or
// its own pause when set).
type fault struct {
	name   string
	pause  time.Duration
	inject func(c *cluster, ctx context.Context) (undo func())
}

func signal(c *cluster, i int, sig syscall.Signal) {
	if err := c.replicas[i].Cmd.Process.Signal(sig); err != nil {
		c.t.Fatalf("signalling replica %s: %v", c.replicas[i].Name, err)
	}
}

// kill SIGKILLs replica i and starts it again on its data directory.
func kill(c *cluster, i int) func() {
	signal(c, i, syscall.SIGKILL)
	<-c.replicas[i].Exited
	return func() { c.replicas[i] = c.replicas[i].Restart(c.top, c.bin, c.url) }
}

func stop(c *cluster, i int) func() {
	signal(c, i, syscall.SIGSTOP)
	return func() { signal(c, i, syscall.SIGCONT) }
}

func follower(c *cluster, ctx context.Context) int { return (c.leader(ctx) + 1) % len(c.replicas) }

// killEtcd SIGKILLs etcd member i and starts it again on its data.
func killEtcd(c *cluster, i int) func() {
	c.etcd.Kill(i)
	return func() { c.etcd.Restart(i) }
}

// rolling stops every replica in turn (SIGTERM, as a rollout does), starts
// it again on its data directory and waits until it serves before the next.
func rolling(c *cluster, _ context.Context) func() {
	for i, r := range c.replicas {
		signal(c, i, syscall.SIGTERM)
		select {
		case <-r.Exited:
		case <-time.After(30 * time.Second):
			c.t.Fatalf("replica %s did not stop within 30 s of SIGTERM", r.Name)
		}
		c.replicas[i] = r.Restart(c.top, c.bin, c.url)
	}
	return func() {}
}

var faults = []fault{
	{name: "the leader SIGKILLed", inject: func(c *cluster, ctx context.Context) func() { return kill(c, c.leader(ctx)) }},
	{name: "a follower SIGKILLed", inject: func(c *cluster, ctx context.Context) func() { return kill(c, follower(c, ctx)) }},
	{name: "the leader SIGSTOPped past its Lease", inject: func(c *cluster, ctx context.Context) func() { return stop(c, c.leader(ctx)) }},
	{name: "an etcd member SIGKILLed", inject: func(c *cluster, ctx context.Context) func() {
		return killEtcd(c, (c.etcd.Leader(ctx)+1)%len(c.etcd.Members))
	}},
	{name: "the etcd leader SIGKILLed", inject: func(c *cluster, ctx context.Context) func() { return killEtcd(c, c.etcd.Leader(ctx)) }},
	{name: "every replica restarted in turn", pause: time.Second, inject: rolling},
	// A follower SIGSTOPped past the hold period is the case "a follower
	// holding admitted creates paused past the hold period": paused while
	// it surely holds some.
}

// TestFaults: under a steady load of governed creates, updates and deletes
// spread round-robin over three replicas, one fault at a time; each client
// records what it saw, and the checker proves the histories against what is
// stored once the hold period has passed (docs/reliability.md).
func TestFaults(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs several processes")
	}
	// Not quotatest.Exclusive as a whole: the checker proves correctness,
	// which the machine's load cannot change, and the test is mostly
	// waiting (faults, hold periods); holding every other heavy test back
	// for its three minutes cost the suite as much. The one case that
	// needs a prompt failover takes the lock for itself.
	c := newCluster(t)
	for _, f := range faults {
		t.Run(f.name, func(t *testing.T) {
			c.t = t
			ctx := t.Context()
			clients := c.clients()
			lv := newLevels(t, clients, orgLimit, 12, 25)
			lctx, stopLoad := context.WithCancel(ctx)
			done := make(chan *History)
			go func() {
				done <- Load{Clients: clients, Levels: lv, Workers: 6, Pace: 20 * time.Millisecond, Timeout: 20 * time.Second}.Run(lctx)
			}()
			time.Sleep(warmup)
			undo := f.inject(c, ctx)
			if f.pause > 0 {
				time.Sleep(f.pause)
			} else {
				time.Sleep(pause)
			}
			undo()
			time.Sleep(after)
			stopLoad()
			h := <-done
			ops := h.Ops()
			t.Logf("clients saw: %s", Summarize(ops))
			// Read through a replica that was not faulted last.
			st, took := Settle(ctx, quotatest.NewClient(t, c.replicas[c.leader(ctx)].Config), lv, holdWait)
			t.Logf("settled %s after the load: %s", took.Round(time.Second), st.Describe(lv))
			for _, b := range Check(ops, st, lv) {
				t.Error(b)
			}
		})
	}
	t.Run("the leader paused with forwarded decisions in flight", func(t *testing.T) {
		// A retry reaches the new leader only if the failover (Lease 3 s
		// plus the rebuild) ends within the request timeout (10 s).
		quotatest.Exclusive(t)
		c.t = t
		leaderPausedWithDecisionsInFlight(t, c)
	})
	t.Run("a follower holding admitted creates paused past the hold period", func(t *testing.T) {
		c.t = t
		pausedWithDecisionsInFlight(t, c)
	})
	t.Run("etcd restored from a snapshot taken under load", func(t *testing.T) {
		c.t = t
		restoreFromSnapshot(t, c)
	})
}

// TestFaults ends with the etcd cluster restored from a snapshot taken under
// load: every replica is stopped, every member restored (revisions bumped
// and compacted, as for Kubernetes), and the replicas started again. The
// objects written after the snapshot are gone; afterwards verify is clean,
// or verify --repair makes it so, and no bucket counts an object the
// snapshot does not hold.
func restoreFromSnapshot(t *testing.T, c *cluster) {
	ctx := t.Context()
	clients := c.clients()
	lv := newLevels(t, clients, orgLimit, 12, 25)
	lctx, stopLoad := context.WithCancel(ctx)
	done := make(chan *History)
	go func() {
		done <- Load{Clients: clients, Levels: lv, Workers: 6, Pace: 20 * time.Millisecond, Timeout: 20 * time.Second}.Run(lctx)
	}()
	time.Sleep(warmup)
	snap := filepath.Join(t.TempDir(), "etcd.snapshot")
	c.etcd.Snapshot(ctx, snap)
	time.Sleep(after)
	stopLoad()
	t.Logf("clients saw: %s", Summarize((<-done).Ops()))
	for i, r := range c.replicas {
		signal(c, i, syscall.SIGTERM)
		<-r.Exited
	}
	c.etcd.Restore(snap)
	for i, r := range c.replicas {
		c.replicas[i] = r.Restart(c.top, c.bin, c.url)
	}
	verify := func(args ...string) (string, error) {
		cmd := exec.CommandContext(ctx, c.bin, append([]string{"verify", "--data-dir", c.replicas[0].DataDir, "--recheck-after", "2s"}, args...)...)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil {
		t.Logf("verify after the restore found discrepancies (%v):\n%s", err, out)
		if out, err := verify("--repair"); err != nil {
			t.Fatalf("verify --repair after the restore: %v\n%s", err, out)
		}
		if out, err := verify(); err != nil {
			t.Fatalf("verify after verify --repair: %v\n%s", err, out)
		}
	}
	st, took := Settle(ctx, quotatest.NewClient(t, c.replicas[c.leader(ctx)].Config), lv, holdWait)
	t.Logf("settled %s after the restore: %s", took.Round(time.Second), st.Describe(lv))
	// No history to hold the state to: the restore forgets what came
	// after the snapshot. What is stored must be what is charged.
	for _, b := range Check(nil, st, lv) {
		t.Error(b)
	}
}

// pausedWithDecisionsInFlight: a burst of creates is sent to a follower,
// which is SIGSTOPped in the middle of it: the leader has decided grants for
// creates the follower has not stored (the bucket counts more than is
// stored). After the hold period the leader releases them; the follower,
// resumed, cannot store those objects any more (their requests' deadline
// passed): nothing stored is uncharged, nothing is held for nothing.
func pausedWithDecisionsInFlight(t *testing.T, c *cluster) {
	const burst, room, rounds = 60, 400, 5
	ctx := t.Context()
	clients := c.clients()
	lv := newLevels(t, clients, room, room, room)
	li := c.leader(ctx)
	fi := (li + 1) % len(c.replicas)
	leader := quotatest.NewClient(t, c.replicas[li].Config)
	h := &History{}
	began := time.Now()
	var wg sync.WaitGroup
	create := func(name string, i int) {
		op := Op{Kind: "create", Name: name, Replica: fi, Start: time.Since(began)}
		octx, cancel := context.WithTimeout(context.Background(), holdPeriod+30*time.Second)
		defer cancel()
		err := clients[fi].Create(octx, lv.secret(op.Name, lv.Projects[i%len(lv.Projects)]))
		op.Took = time.Since(began) - op.Start
		op.record(err)
		h.add(op)
	}
	// Paused as soon as the leader has recorded a burst's first grant in
	// its journal, with the rest of the burst in flight. The follower may
	// have stored that first object already (the pause comes a few ms
	// after the grant): then no decided create is in flight, and the burst
	// is let finish and sent again.
	var held []string // UIDs of objects decided and not stored at the pause
	var undo func()
	for round := range rounds {
		firstGrant(t, c, lv.NS, func() {
			for i := range burst {
				wg.Go(func() { create(fmt.Sprintf("r%d-%d", round, i), i) })
			}
		})
		undo = stop(c, fi)
		// The grants the journal holds for objects that are not stored:
		// what the test is about.
		_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Second, true, func(ctx context.Context) (bool, error) {
			held = unstored(t, c, leader, lv)
			return len(held) > 0, nil
		})
		if len(held) > 0 {
			t.Logf("round %d: paused %s with %d decided creates not stored", round+1, c.replicas[fi].Name, len(held))
			break
		}
		undo()
		wg.Wait()
		t.Logf("round %d: the follower had stored what was decided when it paused; again", round+1)
		if round == rounds-1 {
			t.Fatalf("the follower was paused with no decided create in flight in %d bursts: the case was not reached", rounds)
		}
	}
	pausedAt := time.Now()
	// Past the hold period — not before: the paused follower holds the
	// leader's answers and would store their objects on resume — the
	// leader releases them (their journal entries go).
	var left []string
	_ = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, holdWait, true, func(ctx context.Context) (bool, error) {
		left = slices.DeleteFunc(unstored(t, c, leader, lv), func(uid string) bool { return !slices.Contains(held, uid) })
		return len(left) == 0, nil
	})
	releasedAfter := time.Since(pausedAt)
	if len(left) > 0 {
		undo()
		t.Fatalf("the leader still holds %d grants for objects not stored, %s into the pause", len(left), releasedAfter.Round(time.Second))
	}
	if releasedAfter < holdPeriod-5*time.Second {
		t.Errorf("the leader released the grants of a paused follower's requests %s into the pause, before the hold period (%s): the follower holds their answers", releasedAfter.Round(100*time.Millisecond), holdPeriod)
	}
	st, took := Settle(ctx, leader, lv, holdWait)
	if !st.settled(lv) {
		undo()
		t.Fatalf("the levels do not match what is stored %s after the release: %s", took, st.Describe(lv))
	}
	t.Logf("released %s into the pause (the hold period is %s): %s", releasedAfter.Round(time.Second), holdPeriod, st.Describe(lv))
	// A storage write in flight at the pause may have landed since: that
	// object is stored and charged, and not what the test is about.
	held = slices.DeleteFunc(held, func(uid string) bool { return slices.Contains(slices.Collect(maps.Values(st.Stored)), uid) })
	if len(held) == 0 {
		undo()
		t.Fatal("every decided create seen at the pause was stored by a write already in flight: the case was not reached")
	}
	undo()
	wg.Wait()
	ops := h.Ops()
	t.Logf("the bursts' clients saw: %s", Summarize(ops))
	st, _ = Settle(ctx, leader, lv, holdWait)
	// Requests the paused follower had not read yet are read after it
	// resumes, with a deadline of their own, and decided afresh: they may be
	// stored, and charged. Those whose grants were released may not.
	for name, uid := range st.Stored {
		if slices.Contains(held, uid) {
			t.Errorf("the resumed follower stored %s (UID %s) after the leader released its grant", name, uid)
		}
	}
	if t.Failed() {
		for _, r := range c.replicas {
			t.Logf("replica %s (leader %s, follower %s) logged last:\n%s", r.Name, c.replicas[li].Name, c.replicas[fi].Name, r.Stderr.Tail())
		}
	}
	t.Logf("%d decided creates were released and not stored after the resume", len(held))
	for _, b := range Check(ops, st, lv) {
		t.Error(b)
	}
}

// unstored are the UIDs of the objects whose grants of admission the
// journal holds and that are not stored.
func unstored(t *testing.T, c *cluster, read client.Client, lv *Levels) []string {
	t.Helper()
	decided := journalGrants(t, c, lv.NS)
	st, err := Read(t.Context(), read, lv)
	if err != nil {
		return nil
	}
	stored := map[string]bool{}
	for _, uid := range st.Stored {
		stored[uid] = true
	}
	var out []string
	for uid := range decided {
		if !stored[uid] {
			out = append(out, uid)
		}
	}
	return out
}

// leaderPausedWithDecisionsInFlight: a burst of creates is sent to a
// follower, and the leader is SIGSTOPped as soon as it decided the first:
// decisions it recorded in its journal but never answered are asked again
// by the follower (its 3 s attempt timed out) of the new leader, which read
// them from the journal and answers each with its earlier grant — charged
// once. It runs until such an answer was seen (up to five bursts).
func leaderPausedWithDecisionsInFlight(t *testing.T, c *cluster) {
	const burst, room = 60, 400
	ctx := t.Context()
	clients := c.clients()
	lv := newLevels(t, clients, room, room, room)
	const seen = "is answered with its earlier grant"
	before := map[int]int{}
	for i, r := range c.replicas {
		before[i] = strings.Count(r.Stderr.String(), seen)
	}
	h := &History{}
	const rounds = 5
	for round := range rounds {
		li := c.leader(ctx)
		fi := (li + 1) % len(c.replicas)
		began := time.Now()
		var wg sync.WaitGroup
		firstGrant(t, c, lv.NS, func() {
			for i := range burst {
				wg.Go(func() {
					op := Op{Kind: "create", Name: fmt.Sprintf("r%d-%d", round, i), Replica: fi, Start: time.Since(began)}
					octx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
					defer cancel()
					err := clients[fi].Create(octx, lv.secret(op.Name, lv.Projects[i%len(lv.Projects)]))
					op.Took = time.Since(began) - op.Start
					op.record(err)
					h.add(op)
				})
			}
		})
		mark := make([]int, len(c.replicas))
		for i, r := range c.replicas {
			mark[i] = len(r.Stderr.String())
		}
		t.Logf("round %d: %s paused at %s", round+1, c.replicas[li].Name, time.Now().Format("15:04:05.000000"))
		undo := stop(c, li)
		time.Sleep(pause)
		undo()
		wg.Wait()
		for i, r := range c.replicas {
			for _, l := range strings.Split(r.Stderr.String()[mark[i]:], "\n") {
				if strings.Contains(l, "Became the quota engine leader") || strings.Contains(l, "Rebuilt quota state") || strings.Contains(l, "earlier grant") {
					t.Logf("%s: %.300s", r.Name, l)
				}
			}
		}
		again := 0
		for i, r := range c.replicas {
			again += strings.Count(r.Stderr.String(), seen) - before[i]
		}
		t.Logf("round %d: the leader %s paused in a burst to %s; creates answered again with their earlier grant: %d", round+1, c.replicas[li].Name, c.replicas[fi].Name, again)
		if again > 0 {
			break
		}
		if round == rounds-1 {
			t.Errorf("no create was asked again after the leader paused with decisions in flight: the case was not reached in %d bursts", rounds)
		}
	}
	ops := h.Ops()
	t.Logf("the bursts' clients saw: %s", Summarize(ops))
	for _, e := range distinctErrors(ops, 5) {
		t.Logf("an error clients saw: %s", e)
	}
	st, took := Settle(ctx, quotatest.NewClient(t, c.replicas[c.leader(ctx)].Config), lv, holdWait)
	t.Logf("settled %s after: %s", took.Round(time.Second), st.Describe(lv))
	for _, b := range Check(ops, st, lv) {
		t.Error(b)
	}
}

// distinctErrors are up to n of the distinct errors of ops.
func distinctErrors(ops []Op, n int) []string {
	var out []string
	for _, op := range ops {
		if op.Err != "" && !slices.Contains(out, op.Err) && len(out) < n {
			out = append(out, op.Err)
		}
	}
	return out
}

// firstGrant runs start and returns as soon as a grant of admission of an
// object in ns is written to the journal in etcd: the moment a leader has
// decided a create there and is about to answer it. (Grants of other
// namespaces, such as an earlier case's settling, are not the moment.)
func firstGrant(t *testing.T, c *cluster, ns string, start func()) {
	t.Helper()
	cli := c.etcdClient()
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w := cli.Watch(clientv3.WithRequireLeader(wctx), formats.AdmissionGrantsPrefix("/registry")+ns+"/", clientv3.WithPrefix())
	start()
	for resp := range w {
		for _, ev := range resp.Events {
			if ev.Type == clientv3.EventTypePut {
				return
			}
		}
	}
	t.Fatal("no grant was written to the journal within 30 s")
}

// journalGrants reads the grants of admission of objects in ns that the
// journal holds (decided, their claims not written yet), by object UID.
func journalGrants(t *testing.T, c *cluster, ns string) map[string]bool {
	t.Helper()
	resp, err := c.etcdClient().Get(t.Context(), formats.AdmissionGrantsPrefix("/registry")+ns+"/", clientv3.WithPrefix())
	if err != nil {
		t.Fatalf("reading the journal: %v", err)
	}
	out := map[string]bool{}
	for _, kv := range resp.Kvs {
		var p formats.PendingClaim
		if err := json.Unmarshal(kv.Value, &p); err != nil {
			t.Fatalf("journal entry %s: %v", kv.Key, err)
		}
		if !p.Release && p.ObjectUID != "" {
			out[p.ObjectUID] = true
		}
	}
	return out
}

// etcdClient is a client of the etcd cluster, closed when the test ends.
func (c *cluster) etcdClient() *clientv3.Client {
	c.t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: strings.Split(c.url, ","), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Cleanup(func() { _ = cli.Close() })
	return cli
}
