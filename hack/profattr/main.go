// Command profattr attributes the CPU samples of a profile to components:
// each sample goes to the first rule, in order, that one of its frames
// matches (a rule is a name and a regular expression over function names);
// the rest is "other". docs/benchmarks.md uses it to say where the time of a
// charged create goes.
//
//	go run ./hack/profattr -n 3000 a.prof [b.prof ...]
package main

import (
	"flag"
	"fmt"
	"os"
	"regexp"
	"sort"

	"github.com/google/pprof/profile"
)

type rule struct {
	name string
	re   *regexp.Regexp
}

// rules are checked in order: the first that matches any frame of a
// sample takes it.
var rules = []rule{
	{"admission: ClaimCreationPolicy (render, check, decide)", regexp.MustCompile(`quotaplane/internal/admission/claimpolicy\.`)},
	{"admission: other quotaplane plugins", regexp.MustCompile(`quotaplane/internal/admission/`)},
	{"engine: journal and claim writes (Committer)", regexp.MustCompile(`quotaplane/internal/engine/fence\.\(\*Committer\)\.Run`)},
	{"engine: settle", regexp.MustCompile(`quotaplane/internal/engine/settle\.`)},
	{"engine: status writers (claims, buckets)", regexp.MustCompile(`quotaplane/internal/engine/status\.`)},
	{"engine: charging existing objects", regexp.MustCompile(`quotaplane/internal/engine/existing\.`)},
	{"engine: informers' handlers", regexp.MustCompile(`quotaplane/internal/engine\.`)},
	{"engine: other", regexp.MustCompile(`quotaplane/internal/engine/`)},
	{"resourcequota controller", regexp.MustCompile(`pkg/controller/resourcequota\.`)},
	{"resourcequota admission", regexp.MustCompile(`plugin/pkg/admission/resourcequota|apiserver/pkg/admission/plugin/resourcequota`)},
	{"garbage collector", regexp.MustCompile(`pkg/controller/garbagecollector`)},
	{"client-go informers (decode, stores)", regexp.MustCompile(`client-go/tools/cache\.|client-go/rest/watch`)},
	{"API: watch serving", regexp.MustCompile(`apiserver/pkg/endpoints/handlers\.serveWatch|handlers\.\(\*WatchServer\)|watchEncoder`)},
	{"API: watch cache", regexp.MustCompile(`apiserver/pkg/storage/cacher\.\(\*Cacher\)\.(dispatchEvents|processEvent|startCaching)|cacher\.\(\*watchCache\)|etcd3\.\(\*watchChan\)`)},
	{"API: requests (handlers, storage calls)", regexp.MustCompile(`net/http\.serverHandler\.ServeHTTP|http2\.\(\*serverConn\)\.runHandler`)},
	{"etcd server", regexp.MustCompile(`go\.etcd\.io/etcd/server/`)},
	{"clients of the benchmark", regexp.MustCompile(`quotaplane/test/bench\.`)},
	{"http2/grpc transport", regexp.MustCompile(`golang\.org/x/net/http2|google\.golang\.org/grpc`)},
	{"GC (runtime)", regexp.MustCompile(`runtime\.gcBgMarkWorker|runtime\.bgsweep|runtime\.bgscavenge`)},
}

func main() {
	n := flag.Int("n", 1, "divide by this many operations (per-operation figures)")
	index := flag.String("sample", "", "the sample type to count (alloc_space for a heap profile); the last one when empty")
	base := flag.String("base", "", "subtract this profile first (the allocations before a window)")
	focus := flag.String("focus", "", "count only the samples with a frame matching this regular expression (runtime.mallocgc: allocation)")
	flag.Parse()
	var only *regexp.Regexp
	if *focus != "" {
		only = regexp.MustCompile(*focus)
	}
	for _, file := range flag.Args() {
		f, err := os.Open(file)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		p, err := profile.Parse(f)
		_ = f.Close()
		if err == nil && *base != "" {
			p, err = subtract(p, *base)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		totals := map[string]int64{}
		var all int64
		vi := len(p.SampleType) - 1 // cpu nanoseconds
		for i, st := range p.SampleType {
			if st.Type == *index {
				vi = i
			}
		}
		for _, s := range p.Sample {
			if only != nil && !matches(s, only) {
				continue
			}
			v := s.Value[vi]
			all += v
			totals[classify(s)] += v
		}
		names := make([]string, 0, len(totals))
		for k := range totals {
			names = append(names, k)
		}
		sort.Slice(names, func(i, j int) bool { return totals[names[i]] > totals[names[j]] })
		fmt.Printf("%s: %.2f s of CPU, %.0f µs per operation\n", file, float64(all)/1e9, float64(all)/1e3/float64(*n))
		for _, k := range names {
			fmt.Printf("  %-55s %6.2f s %5.1f%% %7.0f µs/op\n", k, float64(totals[k])/1e9, 100*float64(totals[k])/float64(all), float64(totals[k])/1e3/float64(*n))
		}
	}
}

// subtract is p less the profile in the file base.
func subtract(p *profile.Profile, base string) (*profile.Profile, error) {
	f, err := os.Open(base)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	b, err := profile.Parse(f)
	if err != nil {
		return nil, err
	}
	b.Scale(-1)
	return profile.Merge([]*profile.Profile{p, b})
}

func classify(s *profile.Sample) string {
	for _, r := range rules {
		if matches(s, r.re) {
			return r.name
		}
	}
	return "other"
}

// matches reports whether a frame of s is a function re matches.
func matches(s *profile.Sample, re *regexp.Regexp) bool {
	for _, loc := range s.Location {
		for _, l := range loc.Line {
			if l.Function != nil && re.MatchString(l.Function.Name) {
				return true
			}
		}
	}
	return false
}
