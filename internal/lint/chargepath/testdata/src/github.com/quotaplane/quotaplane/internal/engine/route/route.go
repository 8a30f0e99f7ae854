package route

type Handle struct{}

func (h *Handle) DecideCreate() error { return nil }
func (h *Handle) DecideUpdate() error { return nil }
func (h *Handle) Review() error       { return nil }
func (h *Handle) WaitAdmitted()       {}
func (h *Handle) CreateEnded()        {}

func (h *Handle) own() error { return h.DecideCreate() }
