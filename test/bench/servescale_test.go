package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/pprof/profile"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/test/quotatest"
)

// serveScaleOrgs are BenchmarkServeScale's organization counts, from
// QUOTAPLANE_SERVE_SCALE_ORGS (comma-separated); without it the benchmark
// is skipped.
func serveScaleOrgs(b *testing.B) []int {
	v := os.Getenv("QUOTAPLANE_SERVE_SCALE_ORGS")
	if v == "" {
		b.Skip("QUOTAPLANE_SERVE_SCALE_ORGS is not set (for example 10000,30000)")
	}
	var out []int
	for _, s := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			b.Fatalf("QUOTAPLANE_SERVE_SCALE_ORGS=%q: want organization counts, comma-separated", v)
		}
		out = append(out, n)
	}
	return out
}

// BenchmarkServeScale measures a real `quotaplane serve` process holding N
// organizations of docs/scale.md's shape (2 projects, 3 grants, 8 buckets,
// 10 granted and sealed claims each, with their namespaces and RBAC): the
// time from starting the process to its first decision (a claim created
// after the start, decided by the engine, as BenchmarkRecovery measures),
// and, once it has decided, its heap in use after a collection and its
// RSS, with the heap attributed to components. The objects are seeded
// straight into the embedded etcd (servescaleseed_test.go).
//
// QUOTAPLANE_SERVE_BINARY measures another build of serve (by default this
// tree's); GOMEMLIMIT reaches serve through the environment;
// QUOTAPLANE_SERVE_SCALE_PROFILES names a directory for the heap profiles.
// The process is killed, and the size reported as not fitting, when the
// machine has less than QUOTAPLANE_SERVE_SCALE_MIN_FREE_GIB (default 2) of
// memory available.
func BenchmarkServeScale(b *testing.B) {
	sizes := serveScaleOrgs(b)
	bin := os.Getenv("QUOTAPLANE_SERVE_BINARY")
	if bin == "" {
		bin = quotatest.BuildBinary(b)
	}
	for _, orgs := range sizes {
		b.Run(fmt.Sprintf("orgs=%d", orgs), func(b *testing.B) {
			b.StopTimer()
			for range b.N {
				serveScaleOnce(b, bin, orgs)
			}
		})
	}
}

func serveScaleOnce(b *testing.B, bin string, orgs int) {
	dataDir := filepath.Join(b.TempDir(), "serve")
	s := startServe(b, bin, dataDir, 2*time.Minute)
	tmpl := makeTemplate(b, s)
	s.stop(b)
	seeded := seed(b, dataDir, tmpl, orgs)
	b.Logf("seeded %d organizations (%d keys in all) in %s", orgs, seeded.objects, seeded.took.Round(time.Second))

	load0 := loadAverage()
	began := time.Now()
	s = startServe(b, bin, dataDir, 30*time.Minute)
	defer s.stop(b)
	ready := time.Since(began)
	c := quotatest.NewClient(b, s.longConfig)
	probe := scaleInstanceClaim(seedToken, 0, 1000, fmt.Sprintf("probe-%d", time.Now().UnixNano()))
	ctx := context.Background()
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		s.checkMemory(b, orgs)
		return c.Create(ctx, probe.DeepCopy()) == nil, nil
	})
	if err != nil {
		b.Fatalf("the probe claim was never created\n%s", s.stderr.Tail())
	}
	created := time.Since(began)
	var decision *metav1.Condition
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Minute, true, func(ctx context.Context) (bool, error) {
		s.checkMemory(b, orgs)
		var got quotav1alpha1.ResourceClaim
		if c.Get(ctx, types.NamespacedName{Namespace: probe.Namespace, Name: probe.Name}, &got) != nil {
			return false, nil
		}
		decision = quotav1alpha1.ClaimDecision(got.Status.Conditions)
		return decision != nil, nil
	})
	if err != nil {
		b.Fatalf("the probe claim was not decided within 30 minutes\n%s", s.stderr.Tail())
	}
	firstDecision := time.Since(began)
	b.Logf("serve ready (banner) after %s, probe created after %s, decided %s (%s) after %s; load average %s at the start, %s now",
		ready.Round(10*time.Millisecond), created.Round(10*time.Millisecond), decision.Status, decision.Reason,
		firstDecision.Round(10*time.Millisecond), load0, loadAverage())

	rssAtDecision := s.status(b)
	// Let the start's work (bucket writes, controllers' first rounds)
	// finish before the heap is read.
	time.Sleep(20 * time.Second)
	heapProfile := s.heapProfile(b, orgs)
	inuse, alloc := s.heapMetrics(b)
	st := s.status(b)
	per := float64(orgs) / 10000
	b.ReportMetric(firstDecision.Seconds(), "s-to-first-decision")
	b.ReportMetric(seeded.took.Seconds(), "s-seed")
	b.ReportMetric(float64(seeded.objects), "objects")
	b.ReportMetric(inuse/(1<<20), "MiB-heap-inuse")
	b.ReportMetric(alloc/(1<<20), "MiB-heap-alloc")
	b.ReportMetric(float64(st["VmRSS"])/1024, "MiB-RSS")
	b.ReportMetric(inuse/(1<<30)/per, "GiB-heap-per-10k-orgs")
	b.ReportMetric(float64(st["VmRSS"])/(1<<20)/per, "GiB-RSS-per-10k-orgs")
	b.Logf("at the decision: VmRSS %d MiB (RssAnon %d, RssFile %d); 20 s later: VmRSS %d MiB (RssAnon %d, RssFile %d), VmHWM %d MiB; heap in use %.0f MiB, HeapAlloc %.0f MiB (after a GC)",
		rssAtDecision["VmRSS"]/1024, rssAtDecision["RssAnon"]/1024, rssAtDecision["RssFile"]/1024,
		st["VmRSS"]/1024, st["RssAnon"]/1024, st["RssFile"]/1024, st["VmHWM"]/1024, inuse/(1<<20), alloc/(1<<20))
	if heapProfile != nil {
		b.Logf("heap in use by component (pprof inuse_space):\n%s", attributeHeap(heapProfile))
	}
}

// serveProcess is a running `quotaplane serve`.
type serveProcess struct {
	cmd        *exec.Cmd
	dataDir    string
	stderr     *quotatest.SyncBuffer
	exited     chan struct{}
	config     *rest.Config // 5 s timeout
	longConfig *rest.Config // 10 minutes
	kube       kubernetes.Interface
	longKube   kubernetes.Interface
	minFree    int64 // kB of MemAvailable below which it is killed
}

// startServe starts serve on dataDir and waits, at most ready, for its
// banner.
func startServe(b *testing.B, bin, dataDir string, ready time.Duration) *serveProcess {
	s := &serveProcess{dataDir: dataDir, stderr: &quotatest.SyncBuffer{}, exited: make(chan struct{}), minFree: 2 << 20}
	if v := os.Getenv("QUOTAPLANE_SERVE_SCALE_MIN_FREE_GIB"); v != "" {
		gib, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("QUOTAPLANE_SERVE_SCALE_MIN_FREE_GIB=%q: want GiB", v)
		}
		s.minFree = int64(gib) << 20
	}
	s.cmd = exec.Command(bin, "serve", "--data-dir", dataDir, "--secure-port", strconv.Itoa(quotatest.FreePort(b)),
		"--leader-elect-lease-duration", "3s", "--leader-elect-renew-deadline", "2s", "--leader-elect-retry-period", "250ms")
	s.cmd.Stderr = s.stderr
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := s.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	banner := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			close(banner)
		}
		for sc.Scan() {
		}
		_ = s.cmd.Wait()
		close(s.exited)
	}()
	b.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		select {
		case <-s.exited:
		case <-time.After(30 * time.Second):
		}
	})
	timer := time.NewTimer(ready)
	defer timer.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for waiting := true; waiting; {
		select {
		case <-banner:
			waiting = false
		case <-s.exited:
			b.Fatalf("serve exited before it was ready\n%s", s.stderr.Tail())
		case <-timer.C:
			b.Fatalf("serve was not ready within %s\n%s", ready, s.stderr.Tail())
		case <-tick.C:
			s.checkMemory(b, 0)
		}
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dataDir, "admin.kubeconfig"))
	if err != nil {
		b.Fatal(err)
	}
	s.longConfig = rest.CopyConfig(cfg)
	s.longConfig.Timeout = 10 * time.Minute
	s.longConfig.QPS, s.longConfig.Burst = 100, 200
	s.longKube = kubernetes.NewForConfigOrDie(s.longConfig)
	cfg.Timeout = 5 * time.Second
	s.config = cfg
	s.kube = kubernetes.NewForConfigOrDie(cfg)
	return s
}

// checkMemory kills serve and fails the benchmark when the machine runs
// short of memory.
func (s *serveProcess) checkMemory(b *testing.B, orgs int) {
	data, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemAvailable:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			if kb < s.minFree {
				st := s.status(b)
				_ = s.cmd.Process.Kill()
				b.Fatalf("%d organizations do not fit: the machine had %d MiB available with serve at VmRSS %d MiB (VmHWM %d MiB); serve killed",
					orgs, kb/1024, st["VmRSS"]/1024, st["VmHWM"]/1024)
			}
		}
	}
}

// stop stops serve as an operator does (SIGTERM) and waits, at most two
// minutes, until it has exited.
func (s *serveProcess) stop(b *testing.B) {
	select {
	case <-s.exited:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.exited:
	case <-time.After(2 * time.Minute):
		_ = s.cmd.Process.Kill()
		<-s.exited
	}
}

// status is serve's /proc/PID/status, in kB.
func (s *serveProcess) status(b *testing.B) map[string]int64 {
	out := map[string]int64{}
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", s.cmd.Process.Pid))
	if err != nil {
		return out
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && strings.HasSuffix(f[0], ":") {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				out[strings.TrimSuffix(f[0], ":")] = kb
			}
		}
	}
	return out
}

// heapProfile reads serve's heap profile after a collection (the API
// server's /debug/pprof/heap?gc=1), writing it to
// QUOTAPLANE_SERVE_SCALE_PROFILES when set; nil when serve serves none.
func (s *serveProcess) heapProfile(b *testing.B, orgs int) *profile.Profile {
	data, err := s.longKube.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/heap").Param("gc", "1").DoRaw(context.Background())
	if err != nil {
		b.Logf("no heap profile: %v", err)
		return nil
	}
	if dir := os.Getenv("QUOTAPLANE_SERVE_SCALE_PROFILES"); dir != "" {
		name := fmt.Sprintf("heap-%s-orgs%d.pb.gz", filepath.Base(s.cmd.Path), orgs)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	p, err := profile.Parse(bytes.NewReader(data))
	if err != nil {
		b.Logf("the heap profile does not parse: %v", err)
		return nil
	}
	return p
}

// heapMetrics reads go_memstats_heap_inuse_bytes and
// go_memstats_heap_alloc_bytes from serve's /metrics.
func (s *serveProcess) heapMetrics(b *testing.B) (inuse, alloc float64) {
	data, err := s.longKube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(context.Background())
	if err != nil {
		b.Fatalf("reading /metrics: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) != 2 {
			continue
		}
		v, _ := strconv.ParseFloat(f[1], 64)
		switch f[0] {
		case "go_memstats_heap_inuse_bytes":
			inuse = v
		case "go_memstats_heap_alloc_bytes":
			alloc = v
		}
	}
	return inuse, alloc
}

// heapComponents attribute a heap sample to the first component, in
// order, one of whose frames matches. Objects the API server decodes from
// etcd's watch (etcd3.watchChan) are its watch cache's; objects decoded
// from a watch stream (client-go's StreamWatcher: informers list through
// watches) are in-process informers' (the engine's, the tenancy
// controllers', the upstream controllers').
var heapComponents = []struct {
	name string
	re   *regexp.Regexp
}{
	{"API server: watch cache", regexp.MustCompile(`k8s\.io/apiserver/pkg/storage/(cacher|etcd3\.\(\*watchChan\))`)},
	{"engine: decider (internal/engine/cache, internal/quota)", regexp.MustCompile(`quotaplane/internal/(engine/cache|quota)`)},
	{"engine: other", regexp.MustCompile(`quotaplane/internal/engine`)},
	{"garbage collector's graph", regexp.MustCompile(`pkg/controller/garbagecollector`)},
	{"in-process informers (engine, tenancy, upstream controllers)", regexp.MustCompile(`k8s\.io/client-go/tools/cache|apimachinery/pkg/watch\.\(\*StreamWatcher\)|client-go/rest/watch|metadatainformer`)},
	{"etcd embedded (go.etcd.io)", regexp.MustCompile(`go\.etcd\.io/`)},
	{"API server: other", regexp.MustCompile(`k8s\.io/(apiserver|kube-aggregator|apiextensions-apiserver)/`)},
	{"other quotaplane", regexp.MustCompile(`quotaplane/`)},
}

// decodedType finds the outermost protobuf Unmarshal of a stack: the type
// of the object an allocation belongs to.
var decodedType = regexp.MustCompile(`\.\(\*(\w+)\)\.Unmarshal$`)

// componentOf is the first of heapComponents one of whose frames a sample's
// stack names, "other" when none does.
func componentOf(sm *profile.Sample) string {
	for _, c := range heapComponents {
		for _, loc := range sm.Location {
			for _, l := range loc.Line {
				if l.Function != nil && c.re.MatchString(l.Function.Name) {
					return c.name
				}
			}
		}
	}
	return "other"
}

// attributeHeap sums p's inuse_space by component and lists, for each,
// its largest allocation sites.
func attributeHeap(p *profile.Profile) string {
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return "no inuse_space in the profile"
	}
	type part struct {
		bytes int64
		sites map[string]int64
	}
	parts := map[string]*part{}
	var total int64
	for _, sm := range p.Sample {
		v := sm.Value[idx]
		total += v
		name := componentOf(sm)
		pt := parts[name]
		if pt == nil {
			pt = &part{sites: map[string]int64{}}
			parts[name] = pt
		}
		pt.bytes += v
		site := "?"
		if len(sm.Location) > 0 && len(sm.Location[0].Line) > 0 && sm.Location[0].Line[0].Function != nil {
			site = sm.Location[0].Line[0].Function.Name
		}
		for k := len(sm.Location) - 1; k >= 0; k-- {
			if ls := sm.Location[k].Line; len(ls) > 0 && ls[len(ls)-1].Function != nil {
				if m := decodedType.FindStringSubmatch(ls[len(ls)-1].Function.Name); m != nil {
					site = "decoded " + m[1]
					break
				}
			}
		}
		pt.sites[site] += v
	}
	names := make([]string, 0, len(parts))
	for n := range parts {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return parts[names[i]].bytes > parts[names[j]].bytes })
	var out strings.Builder
	fmt.Fprintf(&out, "  total %.0f MiB\n", float64(total)/(1<<20))
	for _, n := range names {
		pt := parts[n]
		fmt.Fprintf(&out, "  %-60s %8.0f MiB %5.1f %%\n", n, float64(pt.bytes)/(1<<20), 100*float64(pt.bytes)/float64(total))
		sites := make([]string, 0, len(pt.sites))
		for s := range pt.sites {
			sites = append(sites, s)
		}
		sort.Slice(sites, func(i, j int) bool { return pt.sites[sites[i]] > pt.sites[sites[j]] })
		for _, s := range sites[:min(5, len(sites))] {
			fmt.Fprintf(&out, "      %8.0f MiB  %s\n", float64(pt.sites[s])/(1<<20), s)
		}
	}
	return out.String()
}

// loadAverage is the machine's 1-minute load average.
func loadAverage() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	return strings.Fields(string(data))[0]
}

// TestHeapIsAttributedByComponent: each live byte goes to the first
// component one of its frames names, in heapComponents' order (a decider's
// allocation made under an informer's handler is the decider's), and the
// totals add up. With QUOTAPLANE_HEAP_PROFILE naming a saved profile (one
// BenchmarkServeScale took), it also prints that profile's attribution.
func TestHeapIsAttributedByComponent(t *testing.T) {
	fn := func(names ...string) []*profile.Location {
		var out []*profile.Location
		for _, n := range names {
			out = append(out, &profile.Location{Line: []profile.Line{{Function: &profile.Function{Name: n}}}})
		}
		return out
	}
	p := &profile.Profile{SampleType: []*profile.ValueType{{Type: "inuse_objects"}, {Type: "inuse_space"}}}
	for _, sm := range []struct {
		mib   int64
		stack []string
		want  string
	}{
		{3, []string{"github.com/quotaplane/quotaplane/api/quota/v1alpha1.(*ResourceClaim).Unmarshal", "k8s.io/apiserver/pkg/storage/cacher.(*watchCache).Replace"}, "API server: watch cache"},
		{5, []string{"github.com/quotaplane/quotaplane/internal/quota/bookkeeping.(*Books).SeriesFor", "github.com/quotaplane/quotaplane/internal/engine.(*term).claimsAdded", "k8s.io/client-go/tools/cache.(*processorListener).run"}, "engine: decider (internal/engine/cache, internal/quota)"},
		{7, []string{"k8s.io/apimachinery/pkg/apis/meta/v1.(*ObjectMeta).Unmarshal", "k8s.io/client-go/tools/cache.(*Reflector).list"}, "in-process informers (engine, tenancy, upstream controllers)"},
		{11, []string{"go.etcd.io/raft/v3/raftpb.(*Entry).Unmarshal"}, "etcd embedded (go.etcd.io)"},
		{13, []string{"runtime.malg"}, "other"},
	} {
		s := &profile.Sample{Value: []int64{1, sm.mib << 20}, Location: fn(sm.stack...)}
		if got := componentOf(s); got != sm.want {
			t.Errorf("%v: attributed to %q, want %q", sm.stack, got, sm.want)
		}
		p.Sample = append(p.Sample, s)
	}
	out := attributeHeap(p)
	words := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{"total 39 MiB", "API server: watch cache 3 MiB 7.7 %", "etcd embedded (go.etcd.io) 11 MiB 28.2 % 11 MiB decoded Entry", "other 13 MiB 33.3 %"} {
		if !strings.Contains(words, want) {
			t.Errorf("the attribution does not say %q:\n%s", want, out)
		}
	}
	if file := os.Getenv("QUOTAPLANE_HEAP_PROFILE"); file != "" {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		saved, err := profile.Parse(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s:\n%s", file, attributeHeap(saved))
	}
}
