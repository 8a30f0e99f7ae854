package quotatest

import (
	"fmt"
	"sync"
	"testing"
)

// ForEach runs do(0..n-1) on 16 workers and fails the test on any error.
func ForEach(t testing.TB, n int, do func(i int) error) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	next := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range next {
				if err := do(i); err != nil {
					errs <- fmt.Errorf("item %d: %w", i, err)
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}
