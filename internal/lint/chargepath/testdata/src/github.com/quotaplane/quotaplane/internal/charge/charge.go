package charge

import (
	"github.com/quotaplane/quotaplane/internal/admission/claimauthz"
	"github.com/quotaplane/quotaplane/internal/engine/route"
)

func Charge(h *route.Handle) error {
	if err := claimauthz.AuthorizeClaim(); err != nil {
		return err
	}
	h.WaitAdmitted()
	_ = h.Review()
	_ = h.DecideUpdate()
	return h.DecideCreate()
}
