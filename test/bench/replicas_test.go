package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/test/etcdcluster"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// replicaClients is how many clients send creates in BenchmarkReplicas.
const replicaClients = 16

// BenchmarkReplicas measures governed creates through several serve
// replicas, each its own process: 1, 2 and 3 replicas on a three-member
// etcd cluster (members are processes too), and 1 replica on its own
// embedded etcd (the baseline), in interleaved rounds (-rounds). Creates are
// sent round-robin to the replicas of the case; "followers" sends them only
// to the two replicas that do not lead, so the leader's CPU per create is
// its cost per forwarded decision (the decision, its journal write, the
// claim written once the object is stored). CPU is read from /proc for
// every serve and etcd process of the case.
func BenchmarkReplicas(b *testing.B) {
	bin := quotatest.BuildBinary(b)
	single := quotatest.StartReplica(b, bin, "single", "")
	etcd := etcdcluster.Start(b, 3)
	var reps []*quotatest.Replica
	for _, name := range []string{"a", "b", "c"} {
		reps = append(reps, quotatest.StartReplica(b, bin, name, etcd.Endpoints()))
	}
	leader := engineLeader(b, reps)
	followers := []*quotatest.Replica{}
	for _, r := range reps {
		if r != leader {
			followers = append(followers, r)
		}
	}
	var etcdPIDs []int
	for _, m := range etcd.Members {
		etcdPIDs = append(etcdPIDs, m.Cmd.Process.Pid)
	}
	cases := []struct {
		name    string
		targets []*quotatest.Replica
		all     []*quotatest.Replica // every serve process of the setup
		etcd    []int
	}{
		{"a-embedded-1", []*quotatest.Replica{single}, []*quotatest.Replica{single}, nil},
		{"b-cluster-1", []*quotatest.Replica{leader}, reps, etcdPIDs},
		{"c-cluster-2", []*quotatest.Replica{leader, followers[0]}, reps, etcdPIDs},
		{"d-cluster-3", []*quotatest.Replica{leader, followers[0], followers[1]}, reps, etcdPIDs},
		{"e-followers", followers, reps, etcdPIDs},
	}
	for round := 1; round <= *rounds; round++ {
		for _, cs := range cases {
			b.Run(fmt.Sprintf("%s/round=%d", cs.name, round), func(b *testing.B) {
				b.StopTimer()
				var clients []client.Client
				for _, r := range cs.targets {
					cfg := *r.Config
					cfg.QPS, cfg.Burst, cfg.Timeout = 2000, 4000, 30*time.Second
					clients = append(clients, quotatest.NewClient(b, &cfg))
				}
				f := quotatest.NewFixture(b, clients[0])
				p := f.SecretsPolicy(int64(b.N + 10))
				for _, c := range clients {
					g := *f
					g.C = c
					g.WaitPolicyInForce(corev1.SchemeGroupVersion.WithResource("secrets"),
						&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "in-force-probe", Namespace: f.NS}}, p.Name, p.Generation)
				}
				time.Sleep(time.Second)
				serveBefore, leaderBefore, etcdBefore := cpuOf(b, cs.all), cpuOf(b, []*quotatest.Replica{leader}), pidsCPU(b, cs.etcd)
				if cs.name == "a-embedded-1" {
					leaderBefore = serveBefore
				}
				b.StartTimer()
				elapsed, latencies := runClients(b, b.N, replicaClients, func(i int) error {
					return clients[i%len(clients)].Create(context.Background(), &corev1.Secret{
						ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%06d", i), Namespace: f.NS}, StringData: map[string]string{"k": "v"}})
				})
				b.StopTimer()
				f.WaitBucket(quotatest.N(int64(b.N+10), int64(b.N), 10), "secrets")
				time.Sleep(2 * time.Second) // claims' statuses and buckets written
				serve := cpuOf(b, cs.all) - serveBefore
				lead := cpuOf(b, []*quotatest.Replica{leader}) - leaderBefore
				if cs.name == "a-embedded-1" {
					lead = serve
				}
				et := pidsCPU(b, cs.etcd) - etcdBefore
				n := time.Duration(b.N)
				b.ReportMetric(float64(b.N)/elapsed.Seconds(), "creates/s")
				b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
				b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
				b.ReportMetric(float64((serve+et)/n)/1e6, "cpu-ms/create")
				b.ReportMetric(float64(lead/n)/1e6, "leader-cpu-ms/create")
				b.ReportMetric(float64(et/n)/1e6, "etcd-cpu-ms/create")
				removeNamespace(b, clients[0], f.NS)
			})
		}
	}
}

// engineLeader is the replica whose engine holds the Lease.
func engineLeader(b *testing.B, reps []*quotatest.Replica) *quotatest.Replica {
	b.Helper()
	var leader *quotatest.Replica
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		l, err := reps[0].Client.CoordinationV1().Leases(engine.DefaultOptions().SystemNamespace).Get(ctx, "quotaplane-quota-engine", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return false, nil
		}
		for _, r := range reps {
			if r.Identity == *l.Spec.HolderIdentity {
				leader = r
			}
		}
		return leader != nil, nil
	})
	if err != nil {
		b.Fatal("no replica leads the engine")
	}
	return leader
}

func cpuOf(b *testing.B, reps []*quotatest.Replica) time.Duration {
	var pids []int
	for _, r := range reps {
		pids = append(pids, r.Cmd.Process.Pid)
	}
	return pidsCPU(b, pids)
}

// pidsCPU is the CPU time (user and system) the processes have used, from
// /proc/<pid>/stat, in clock ticks of 10 ms.
func pidsCPU(b *testing.B, pids []int) time.Duration {
	b.Helper()
	var total time.Duration
	for _, pid := range pids {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			b.Fatal(err)
		}
		// The command name may hold spaces: fields count from after ')'.
		fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
		utime, _ := strconv.ParseInt(fields[11], 10, 64)
		stime, _ := strconv.ParseInt(fields[12], 10, 64)
		total += time.Duration(utime+stime) * 10 * time.Millisecond
	}
	return total
}
