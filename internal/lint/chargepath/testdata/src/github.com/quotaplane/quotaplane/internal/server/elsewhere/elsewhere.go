package elsewhere

import (
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz" // want `imports claimauthz`
	"github.com/quotaplane/quotaplane/internal/engine/admit"
)

type reviewer struct{}

// Review of another type is not the engine's.
func (reviewer) Review() error { return nil }

func Assemble(h *admit.Handle) error {
	_ = claimauthz.AuthorizeClaim()
	_ = h.Review()       // want `calls admit.Handle.Review`
	_ = h.DecideUpdate() // want `calls admit.Handle.DecideUpdate`
	h.WaitAdmitted()     // want `calls admit.Handle.WaitAdmitted`
	h.CreateEnded()
	f := h.DecideCreate // want `calls admit.Handle.DecideCreate`
	_ = reviewer{}.Review()
	return f()
}
