package peer

import (
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz" // want `imports claimauthz`
	"github.com/quotaplane/quotaplane/internal/engine/admit"         // want `imports the local-decision package`
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

// The leader answers a follower's forwarded request.
func Serve(h *route.Handle) error { return h.DecideCreate() }

func local(t *admit.Term) error {
	_ = claimauthz.AuthorizeClaim()
	return t.Admit()
}
