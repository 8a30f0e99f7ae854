package testserver

import (
	"sync/atomic"
	"time"

	quotav1alpha1 "github.com/quotaplane/quotaplane/api/quota/v1alpha1"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// Faults are route.Faults a test switches while its server runs: pass them
// in Options.Faults when the server starts, then SetFailure or
// SetAdmittedDelay. The zero value injects nothing. They exist only in
// tests: the shipped binary makes its Handle without faults
// (internal/layout TestTheShippedBinaryHasNoTestHooks checks that this file
// is not built into it).
type Faults struct {
	failure atomic.Pointer[error]
	delay   atomic.Pointer[func(claims []*quotav1alpha1.ResourceClaim) time.Duration]
}

var _ route.Faults = (*Faults)(nil)

// SetFailure makes the leading engine answer every decision with err, as
// when its journal cannot be written; nil stops it.
func (f *Faults) SetFailure(err error) {
	if err == nil {
		f.failure.Store(nil)
		return
	}
	f.failure.Store(&err)
}

// SetAdmittedDelay makes every granted create wait delay(claims) after its
// grant is recorded and before admission lets it go on to storage, ignoring
// the request's deadline; nil stops it.
func (f *Faults) SetAdmittedDelay(delay func(claims []*quotav1alpha1.ResourceClaim) time.Duration) {
	if delay == nil {
		f.delay.Store(nil)
		return
	}
	f.delay.Store(&delay)
}

// Failure is the error SetFailure set, nil for none.
func (f *Faults) Failure() error {
	if e := f.failure.Load(); e != nil {
		return *e
	}
	return nil
}

// AdmittedDelay is the delay SetAdmittedDelay set for these claims, 0 for none.
func (f *Faults) AdmittedDelay(claims []*quotav1alpha1.ResourceClaim) time.Duration {
	if d := f.delay.Load(); d != nil {
		return (*d)(claims)
	}
	return 0
}
