package inforce

import "github.com/quotaplane/quotaplane/internal/engine/admit" // want `imports the local-decision package`

var _ = admit.Term{}
