package reconcile

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"
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

// TestRunRequeue: a key whose reconcile asks for a delay is reconciled again
// after it; every error is retried, NotFound too; a key that succeeds with
// no delay is reconciled once.
func TestRunRequeue(t *testing.T) {
	q := NewQueue[string](time.Millisecond, 10*time.Millisecond)
	type result struct {
		after time.Duration
		err   error
	}
	script := map[string][]result{
		"poll":    {{after: 20 * time.Millisecond}, {after: 20 * time.Millisecond}, {}},
		"missing": {{err: apierrors.NewNotFound(schema.GroupResource{Resource: "things"}, "missing")}, {}},
		"fine":    {{}},
	}
	var mu sync.Mutex
	calls := map[string]int{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		RunRequeue(context.Background(), q, "test", func(_ context.Context, k string) (time.Duration, error) {
			mu.Lock()
			defer mu.Unlock()
			r := script[k][calls[k]]
			calls[k]++
			return r.after, r.err
		})
	}()
	for k := range script {
		q.Add(k)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		came := calls["poll"] == 3 && calls["missing"] == 2
		mu.Unlock()
		if came {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("not every reconcile came")
		}
		time.Sleep(5 * time.Millisecond)
	}
	q.ShutDownWithDrain()
	<-done
	if diff := cmp.Diff(map[string]int{"poll": 3, "missing": 2, "fine": 1}, calls); diff != "" {
		t.Errorf("reconciles per key (-want +got):\n%s", diff)
	}
}

// TestAnInformersCopyIsLean: managed fields are dropped from what an
// informer keeps, and nothing else.
func TestAnInformersCopyIsLean(t *testing.T) {
	obj := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"k": "v"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}}
	out, err := Lean(obj)
	if err != nil {
		t.Fatal(err)
	}
	m := out.(*metav1.PartialObjectMetadata)
	if m.ManagedFields != nil || m.Name != "a" || m.Labels["k"] != "v" {
		t.Errorf("lean copy: %+v; want the managed fields gone and the rest kept", m.ObjectMeta)
	}
	if _, err := Lean(cache.DeletedFinalStateUnknown{Key: "a"}); err != nil {
		t.Errorf("a tombstone: %v", err)
	}
}
