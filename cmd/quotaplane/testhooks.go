//go:build quotaplane_testhooks

package main

import (
	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/engine"
)

// This file is compiled only into binaries built for tests, with
// `go build -tags quotaplane_testhooks` (quotatest.BuildHookedBinary). The
// shipped binary has none of it: internal/layout's
// TestTheShippedBinaryHasNoTestHooks checks what it is built from, and
// TestTheShippedBinaryHasNoTestFlags (cmd/quotaplane) that serve and
// controller refuse the flags below.

// addEngineTestFlags registers the hidden test flags of serve and
// controller, bound to their engine options: --grant-clock-offset shifts the
// clock grant windows are judged by (test/e2e TestGrantExpirySurvivesKill
// restarts serve with its clock an hour behind).
func addEngineTestFlags(fs *pflag.FlagSet, o *engine.Options) {
	fs.DurationVar(&o.ClockOffset, "grant-clock-offset", o.ClockOffset, "Shift the clock grant windows are judged by (test builds only: a replica whose clock is behind or ahead).")
	_ = fs.MarkHidden("grant-clock-offset")
}
