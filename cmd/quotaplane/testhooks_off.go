//go:build !quotaplane_testhooks

package main

import (
	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/engine"
	"github.com/quotaplane/quotaplane/internal/webhook"
)

// addEngineTestFlags is where a test build registers serve's and
// controller's hidden test flags (testhooks.go, built with the tag
// quotaplane_testhooks). The shipped binary, built without the tag, has
// none: this does nothing.
func addEngineTestFlags(*pflag.FlagSet, *engine.Options) {}

// addWebhookTestFlags is where a test build registers the webhook's hidden
// test flag (testhooks.go); the shipped binary has none.
func addWebhookTestFlags(*pflag.FlagSet, *webhook.Options) {}
