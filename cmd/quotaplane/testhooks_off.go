//go:build !quotaplane_testhooks

package main

import (
	"github.com/spf13/pflag"

	"github.com/quotaplane/quotaplane/internal/engine"
)

// addEngineTestFlags is where a test build registers serve's and
// controller's hidden test flags (testhooks.go, built with the tag
// quotaplane_testhooks). The shipped binary, built without the tag, has
// none: this does nothing.
func addEngineTestFlags(*pflag.FlagSet, *engine.Options) {}
