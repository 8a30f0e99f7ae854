//go:build quotaplane_testhooks

package main

import (
	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/webhook"
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

// addWebhookTestFlags registers the webhook's hidden test flag:
// --quota-token-refresh-every refreshes its quota-plane token at most this
// long after it was issued, where a shipped webhook waits 60% of a lifetime
// of 10 minutes at least (test/clusters TestCredentialRotation).
func addWebhookTestFlags(fs *pflag.FlagSet, o *webhook.Options) {
	fs.DurationVar(&o.QuotaTokenRefreshEvery, "quota-token-refresh-every", o.QuotaTokenRefreshEvery, "Refresh the quota-plane token at most this long after it was issued (test builds only).")
	_ = fs.MarkHidden("quota-token-refresh-every")
}
