package reconcile

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestRun: a key that fails is retried until it succeeds; one whose object
// is gone (NotFound) is dropped; the loop ends when its queue shuts down.
func TestRun(t *testing.T) {
	q := NewQueue[string](time.Millisecond, 10*time.Millisecond)
	calls := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(context.Background(), q, "test", func(_ context.Context, k string) error {
			calls[k]++
			switch {
			case k == "flaky" && calls[k] < 3:
				return errors.New("not yet")
			case k == "gone":
				return apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, k)
			}
			return nil
		})
	}()
	q.Add("flaky")
	q.Add("gone")
	q.Add("fine")
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() > 0 || q.NumRequeues("flaky") > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the queue did not drain")
		}
		time.Sleep(5 * time.Millisecond)
	}
	q.ShutDownWithDrain()
	<-done
	if diff := cmp.Diff(map[string]int{"flaky": 3, "gone": 1, "fine": 1}, calls); diff != "" {
		t.Errorf("reconciles per key (-want +got):\n%s", diff)
	}
}
