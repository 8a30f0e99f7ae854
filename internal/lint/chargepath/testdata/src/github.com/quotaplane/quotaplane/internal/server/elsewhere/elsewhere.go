package elsewhere

import (
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz" // want `imports claimauthz`
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

type reviewer struct{}

// Review of another type is not the engine's.
func (reviewer) Review() error { return nil }

func Assemble(h *route.Handle) error {
	_ = claimauthz.AuthorizeClaim()
	_ = h.Review()       // want `calls route.Handle.Review`
	_ = h.DecideUpdate() // want `calls route.Handle.DecideUpdate`
	h.WaitAdmitted()     // not an entry point
	h.CreateEnded()
	f := h.DecideCreate // want `calls route.Handle.DecideCreate`
	_ = reviewer{}.Review()
	return f()
}
