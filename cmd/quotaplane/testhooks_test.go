//go:build quotaplane_testhooks

package main

import "testing"

// TestTestBuildsHaveTheClockOffsetFlag: built with the tag
// quotaplane_testhooks, serve and controller take the hidden
// --grant-clock-offset (what TestTheShippedBinaryHasNoTestFlags refuses in
// the shipped build).
func TestTestBuildsHaveTheClockOffsetFlag(t *testing.T) {
	for _, command := range []string{"serve", "controller"} {
		t.Run(command, func(t *testing.T) {
			sub, _, err := newRootCommand().Find([]string{command})
			if err != nil {
				t.Fatal(err)
			}
			f := sub.Flags().Lookup("grant-clock-offset")
			if f == nil {
				t.Fatalf("a test build's quotaplane %s has no --grant-clock-offset", command)
			}
			if !f.Hidden {
				t.Errorf("quotaplane %s shows --grant-clock-offset in its help", command)
			}
			if err := sub.ParseFlags([]string{"--grant-clock-offset=-1h"}); err != nil {
				t.Fatal(err)
			}
			if got := f.Value.String(); got != "-1h0m0s" {
				t.Errorf("--grant-clock-offset=-1h: the flag holds %s", got)
			}
		})
	}
}

// TestTestBuildsHaveTheTokenRefreshFlag: built with the tag, the webhook
// takes the hidden --quota-token-refresh-every (test/clusters
// TestMemberCredentialRotation refreshes its token every second with it).
func TestTestBuildsHaveTheTokenRefreshFlag(t *testing.T) {
	sub, _, err := newRootCommand().Find([]string{"webhook"})
	if err != nil {
		t.Fatal(err)
	}
	f := sub.Flags().Lookup("quota-token-refresh-every")
	if f == nil {
		t.Fatal("a test build's quotaplane webhook has no --quota-token-refresh-every")
	}
	if !f.Hidden {
		t.Error("quotaplane webhook shows --quota-token-refresh-every in its help")
	}
	if err := sub.ParseFlags([]string{"--quota-token-refresh-every=1s"}); err != nil {
		t.Fatal(err)
	}
	if got := f.Value.String(); got != "1s" {
		t.Errorf("--quota-token-refresh-every=1s: the flag holds %s", got)
	}
}
