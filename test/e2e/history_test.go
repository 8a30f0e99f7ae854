package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/quotaplane/quotaplane/internal/history"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestHistorySurvivesFailoverAndRestart: "why was this claim refused, and
// what did the bucket look like then" is answered by `quotaplane history`
// from the decision history, which lives in the cluster: after the leader
// is SIGKILLed the other replica still shows it and adds its own decisions,
// and after the killed replica is started again both are there.
func TestHistorySurvivesFailoverAndRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs two replicas")
	}
	bin := buildBinary(t)
	quotatest.Exclusive(t)
	etcdURL := quotatest.StartEtcd(t)
	a := quotatest.StartReplica(t, bin, "a", etcdURL)
	b := quotatest.StartReplica(t, bin, "b", etcdURL)
	leader, standby := engineLeader(t, a, b)

	c := quotatest.NewClient(t, leader.Config)
	f := quotatest.NewFixture(t, c)
	f.Register("cpus")
	f.Grant("g", map[string][]quotatest.Bucket{"cpus": {{Amount: 10}}})
	f.Claim("small", quotatest.R("cpus", 7))
	if cond := f.Decided("small"); cond.Status != metav1.ConditionTrue {
		t.Fatalf("small not granted: %s", cond.Message)
	}
	f.WaitBucket(quotatest.N(10, 7, 3), "cpus")
	f.Claim("big", quotatest.R("cpus", 5))
	if cond := f.Decided("big"); cond.Status != metav1.ConditionFalse {
		t.Fatalf("big not denied: %+v", cond)
	}

	big := waitHistory(t, bin, leader, "--object", "ResourceClaim/"+f.NS+"/big")
	denied := findEvent(big, history.ClaimDenied)
	if denied == nil {
		t.Fatalf("no ClaimDenied for big in %+v", big)
	}
	if !strings.Contains(denied.Message, "only 3 of the limit 10 is available") {
		t.Errorf("the denial does not say why: %q", denied.Message)
	}
	if len(denied.Buckets) != 1 || denied.Buckets[0].Limit != 10 || denied.Buckets[0].Allocated != 7 || denied.Buckets[0].Available != 3 {
		t.Errorf("the bucket at the denial = %+v, want limit 10, allocated 7, available 3", denied.Buckets)
	}
	out := runHistory(t, bin, leader, "text", "--object", "ResourceClaim/"+f.NS+"/big")
	t.Logf("quotaplane history --object ResourceClaim/%s/big:\n%s", f.NS, out)
	checkHistoryCLI(t, bin, leader, f.NS, f.Org.Name)

	// Failover: the leader dies; the other replica reads the history and
	// records its own decisions into it.
	if err := leader.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-leader.Exited
	waitLeads(t, standby)
	c2 := quotatest.NewClient(t, standby.Config)
	f2 := *f
	f2.T, f2.C = t, c2
	f2.Claim("bigger", quotatest.R("cpus", 9))
	if cond := f2.Decided("bigger"); cond.Status != metav1.ConditionFalse {
		t.Fatalf("bigger not denied: %+v", cond)
	}
	rows := waitHistory(t, bin, standby, "--consumer", "Organization/"+f.Org.Name, "--want", history.ClaimDenied, "--want-count", "2")
	if findEvent(filter(rows, "big"), history.ClaimDenied) == nil || findEvent(filter(rows, "bigger"), history.ClaimDenied) == nil {
		t.Errorf("after failover, the consumer's history lacks a denial: %+v", rows)
	}
	if findEvent(filter(rows, "small"), history.ClaimGranted) == nil || findEvent(rows, history.GrantCreated) == nil {
		t.Errorf("after failover, the consumer's history lacks the grant of small or the ResourceGrant: %+v", rows)
	}

	// Restart: the killed replica comes back and reads the same.
	restarted := leader.Restart(t, bin, etcdURL)
	rows = waitHistory(t, bin, restarted, "--consumer", "Organization/"+f.Org.Name, "--want", history.ClaimDenied, "--want-count", "2")
	if findEvent(filter(rows, "big"), history.ClaimDenied) == nil || findEvent(filter(rows, "bigger"), history.ClaimDenied) == nil {
		t.Errorf("after the restart, the history lacks a denial: %+v", rows)
	}
}

// engineLeader waits until one of the replicas leads the quota engine.
func engineLeader(t *testing.T, replicas ...*quotatest.Replica) (leader, other *quotatest.Replica) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctxt context.Context) (bool, error) {
		l, err := replicas[0].Client.CoordinationV1().Leases("quotaplane-system").Get(ctxt, "quotaplane-quota-engine", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		for i, r := range replicas {
			if r.Identity == *l.Spec.HolderIdentity {
				leader, other = r, replicas[1-i]
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("no replica leads the quota engine: %v", err)
	}
	return leader, other
}

// waitLeads waits until r holds the engine's Lease.
func waitLeads(t *testing.T, r *quotatest.Replica) {
	t.Helper()
	err := wait.PollUntilContextTimeout(t.Context(), 200*time.Millisecond, time.Minute, true, func(ctxt context.Context) (bool, error) {
		l, err := r.Client.CoordinationV1().Leases("quotaplane-system").Get(ctxt, "quotaplane-quota-engine", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity == r.Identity, nil
	})
	if err != nil {
		t.Fatalf("replica %s did not take the engine over: %v", r.Name, err)
	}
}

func runHistory(t *testing.T, bin string, r *quotatest.Replica, output string, args ...string) string {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"history", "--kubeconfig", filepath.Join(r.DataDir, "admin.kubeconfig"), "-o", output}, args...)...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("quotaplane history %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// waitHistory runs `quotaplane history -o json args` until it lists a
// decision (with --want E and --want-count N, until N entries of event E).
func waitHistory(t *testing.T, bin string, r *quotatest.Replica, args ...string) []history.Row {
	t.Helper()
	want, count := "", 1
	var pass []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "--want":
			want = args[i+1]
			i++
		case "--want-count":
			_, _ = fmt.Sscan(args[i+1], &count)
			i++
		default:
			pass = append(pass, args[i])
		}
	}
	var rows []history.Row
	err := wait.PollUntilContextTimeout(t.Context(), 500*time.Millisecond, 30*time.Second, true, func(context.Context) (bool, error) {
		rows = nil
		if err := json.Unmarshal([]byte(runHistory(t, bin, r, "json", pass...)), &rows); err != nil {
			return false, err
		}
		n := 0
		for _, row := range rows {
			if want == "" || row.Event == want {
				n++
			}
		}
		return n >= count, nil
	})
	if err != nil {
		t.Fatalf("quotaplane history %v: %v; got %+v", pass, err, rows)
	}
	return rows
}

func findEvent(rows []history.Row, event string) *history.Row {
	for i := range rows {
		if rows[i].Event == event {
			return &rows[i]
		}
	}
	return nil
}

// filter keeps the rows about the claim named name.
func filter(rows []history.Row, name string) []history.Row {
	var out []history.Row
	for _, r := range rows {
		if r.Object.Name == name {
			out = append(out, r)
		}
	}
	return out
}

// checkHistoryCLI: kinds are taken as kubectl takes them (plural, singular,
// kind.group); the default table fits 120 columns while -o wide has every
// column; a query that matches nothing says why, on stderr.
func checkHistoryCLI(t *testing.T, bin string, r *quotatest.Replica, ns, org string) {
	t.Helper()
	for _, kind := range []string{"resourceclaims", "resourceclaim", "resourceclaims.quota.miloapis.com"} {
		var rows []history.Row
		if err := json.Unmarshal([]byte(runHistory(t, bin, r, "json", "--object", kind+"/"+ns+"/big")), &rows); err != nil || findEvent(rows, history.ClaimDenied) == nil {
			t.Errorf("history --object %s/%s/big: %v, %+v; want its denial", kind, ns, err, rows)
		}
	}
	short := runHistory(t, bin, r, "", "--consumer", "organizations/"+org)
	for _, l := range strings.Split(strings.TrimRight(short, "\n"), "\n") {
		if n := len([]rune(l)); n > history.Width {
			t.Errorf("a line of the default table is %d columns wide:\n%s", n, l)
		}
	}
	if wide := runHistory(t, bin, r, "wide", "--consumer", "organizations/"+org); !strings.Contains(wide, "BUCKET LIMIT/ALLOCATED/AVAILABLE") {
		t.Errorf("-o wide lacks the buckets' numbers:\n%s", wide)
	}
	kubeconfig := filepath.Join(r.DataDir, "admin.kubeconfig")
	run := func(args ...string) (string, string, error) {
		cmd := exec.Command(bin, append([]string{"history", "--kubeconfig", kubeconfig}, args...)...)
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	if out, errOut, err := run("--consumer", "organizations/nobody-"+org); err != nil || out != "" ||
		!strings.Contains(errOut, "no decisions recorded for Organization nobody-"+org+": the engine has no history for it") ||
		!strings.Contains(errOut, "Organization "+org) {
		t.Errorf("an unknown consumer: %v, stdout %q, stderr %q; want why, naming consumers that have a history", err, out, errOut)
	}
	if _, errOut, err := run("--consumer", "organizations/"+org, "--object", "secrets/"+ns+"/absent"); err != nil ||
		!strings.Contains(errOut, "Organization "+org+" has") || !strings.Contains(errOut, "none about Secret "+ns+"/absent") {
		t.Errorf("an object never decided: %v, stderr %q", err, errOut)
	}
	if _, errOut, err := run("--consumer", "widgetz/x"); err == nil || !strings.Contains(errOut, `serves no kind or resource named "widgetz"`) {
		t.Errorf("an unknown kind: %v, stderr %q", err, errOut)
	}
}
