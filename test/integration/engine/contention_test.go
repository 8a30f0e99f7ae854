package engine

import (
	"testing"
	"time"

	"github.com/quotaplane/quotaplane/test/quotatest"
)

// TestContentionNeverOverAllocates creates 4L claims for a limit of L from
// many goroutines at once, 20 times: exactly L are granted each time, and the
// bucket's allocation equals L.
func TestContentionNeverOverAllocates(t *testing.T) {
	const limit, rounds = 25, 20
	c := quotatest.NewClient(t, srv.Config)
	for round := range rounds {
		f := quotatest.NewFixture(t, c)
		f.Register("projects")
		f.Grant("g", map[string][]quotatest.Bucket{"projects": {{Amount: limit}}})
		if err := quotatest.CreateConcurrently(f, "c", 4*limit, 16); err != nil {
			t.Fatal(err)
		}
		if got := quotatest.CountDecided(t, f, 4*limit, time.Minute); got != limit {
			t.Fatalf("round %d: %d claims granted for a limit of %d", round, got, limit)
		}
		f.WaitBucket(quotatest.N(limit, limit, 0), "projects")
	}
}
