package peer

import "github.com/quotaplane/quotaplane/internal/engine/admit"

// The leader answers a follower's forwarded request.
func Serve(h *admit.Handle) error { return h.DecideCreate() }
