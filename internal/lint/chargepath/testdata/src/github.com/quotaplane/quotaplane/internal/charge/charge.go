package charge

import (
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/engine/route"
	"github.com/quotaplane/quotaplane/internal/policy/claims"
)

func Charge(h *route.Handle) error {
	if err := claimauthz.AuthorizeClaim(); err != nil {
		return err
	}
	_ = claims.NewClaim()
	h.WaitAdmitted()
	_ = h.Review()
	_ = h.DecideUpdate()
	return h.DecideCreate()
}
