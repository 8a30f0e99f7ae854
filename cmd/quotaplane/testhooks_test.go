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
