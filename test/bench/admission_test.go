package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// etcdRevision reads the store's current revision: a quorum list's
// resourceVersion. Every write to etcd raises it by one.
func etcdRevision(b *testing.B, c client.Client) int64 {
	b.Helper()
	list := &corev1.NamespaceList{}
	if err := c.List(context.Background(), list, client.Limit(1)); err != nil {
		b.Fatal(err)
	}
	rv, err := strconv.ParseInt(list.ResourceVersion, 10, 64)
	if err != nil {
		b.Fatal(err)
	}
	return rv
}

// processCPU is the CPU time this process (client, API server, etcd and
// engine together) has used so far.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAdmission compares creates of a small Secret on the same server:
// (a) no quota, (b) the built-in ResourceQuota on count/secrets, (c) a
// ClaimCreationPolicy with the same limit. It reports creates/s, p50/p99
// latency, storage writes per admitted create (etcd revisions, including
// the asynchronous writes that follow within 3 s) and CPU per create (the
// whole process: clients, API server, etcd and engine, same window).
func BenchmarkAdmission(b *testing.B) {
	c := quotatest.NewClient(b, srv.Config)
	for _, clients := range []int{1, 16, 64} {
		for round := 1; round <= *rounds; round++ {
			for _, mode := range []string{"a-none", "b-resourcequota", "c-claimpolicy"} {
				admissionCase(b, c, clients, mode, round)
			}
		}
	}
}

// admissionCase is one case of BenchmarkAdmission: creates by clients
// concurrent clients under mode, in round (of -rounds).
func admissionCase(b *testing.B, c client.Client, clients int, mode string, round int) {
	name := fmt.Sprintf("clients=%d/%s", clients, mode)
	if *rounds > 1 {
		name += fmt.Sprintf("/round=%d", round)
	}
	b.Run(name, func(b *testing.B) {
		b.StopTimer()
		f := quotatest.NewFixture(b, c)
		limit := int64(b.N + 10)
		switch mode {
		case "b-resourcequota":
			rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "secrets", Namespace: f.NS},
				Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{"count/secrets": *resource.NewQuantity(limit, resource.DecimalSI)}}}
			if err := c.Create(context.Background(), rq); err != nil {
				b.Fatal(err)
			}
			waitQuotaStatus(b, c, rq)
		case "c-claimpolicy":
			waitExistingCharged(b, c, f.SecretsPolicy(limit))
		}
		time.Sleep(time.Second) // let set-up writes settle
		before := etcdRevision(b, c)
		stopProfile := startWindowProfile(b, name)
		cpuBefore := processCPU(b)
		b.StartTimer()
		elapsed, latencies := runClients(b, b.N, clients, func(i int) error {
			return c.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%06d", i), Namespace: f.NS}, StringData: map[string]string{"k": "v"}})
		})
		b.StopTimer()
		time.Sleep(3 * time.Second) // the asynchronous writes: claim status, binding, buckets, ledger
		writes := float64(etcdRevision(b, c)-before) / float64(b.N)
		cpu := (processCPU(b) - cpuBefore) / time.Duration(b.N)
		stopProfile()
		b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
		b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
		b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
		b.ReportMetric(writes, "writes/create")
		b.ReportMetric(float64(cpu.Microseconds())/1000, "cpu-ms/create")
		// Leave nothing behind: each case starts from the same server state.
		removeNamespace(b, c, f.NS)
	})
}

// startWindowProfile starts a CPU profile of one case's measured window when
// -window-profiles is set; the returned function stops it.
func startWindowProfile(b *testing.B, name string) func() {
	if *windowProfiles == "" {
		return func() {}
	}
	f, err := os.Create(filepath.Join(*windowProfiles, strings.ReplaceAll(name, "/", "_")+".prof"))
	if err != nil {
		b.Fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		b.Fatal(err)
	}
	// Allocations: the heap profile's cumulative counts at both ends
	// (go tool pprof -sample_index=alloc_space -base <name>.allocs-before).
	heap := func(suffix string) {
		h, err := os.Create(filepath.Join(*windowProfiles, strings.ReplaceAll(name, "/", "_")+suffix))
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = h.Close() }()
		if err := pprof.Lookup("allocs").WriteTo(h, 0); err != nil {
			b.Fatal(err)
		}
	}
	heap(".allocs-before")
	return func() {
		pprof.StopCPUProfile()
		_ = f.Close()
		heap(".allocs-after")
	}
}

// removeNamespace deletes a namespace and waits until it and everything in it
// (claims included) is gone.
func removeNamespace(b *testing.B, c client.Client, name string) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Delete(context.Background(), ns); err != nil {
		b.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(ns), ns)), nil
	})
	if err != nil {
		b.Fatalf("namespace %s was not removed within 2 minutes", name)
	}
	time.Sleep(time.Second) // the engine and garbage collector settle
}

// waitExistingCharged waits until the engine has charged the objects that
// existed when the policy came into force (status.existingObjects): the
// analogue of waiting for a new ResourceQuota's first status, so that the
// one-off pass over every Secret is not measured as part of the creates.
func waitExistingCharged(b *testing.B, c client.Client, p *quotav1alpha1.ClaimCreationPolicy) {
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return false, nil
		}
		st := p.Status.ExistingObjects
		return st != nil && st.Generation == p.Generation, nil
	})
	if err != nil {
		b.Fatalf("policy %s: existing objects not charged within 2 minutes", p.Name)
	}
}

func waitQuotaStatus(b *testing.B, c client.Client, rq *corev1.ResourceQuota) {
	err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(rq), rq); err != nil {
			return false, nil
		}
		return len(rq.Status.Hard) > 0, nil
	})
	if err != nil {
		b.Fatal("the ResourceQuota never got a status")
	}
}
