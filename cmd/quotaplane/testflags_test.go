//go:build !quotaplane_testhooks

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTheShippedBinaryHasNoTestFlags: the shipped build's serve and
// controller refuse --grant-clock-offset, a flag only test builds have
// (testhooks.go, tag quotaplane_testhooks): the command fails, as the
// binary exits 1, saying the flag is unknown.
func TestTheShippedBinaryHasNoTestFlags(t *testing.T) {
	for _, command := range []string{"serve", "controller"} {
		t.Run(command, func(t *testing.T) {
			root := newRootCommand()
			sub, _, err := root.Find([]string{command})
			if err != nil {
				t.Fatal(err)
			}
			// Checked first: with the flag, the command would start.
			if f := sub.Flags().Lookup("grant-clock-offset"); f != nil {
				t.Fatalf("quotaplane %s has the test flag --grant-clock-offset (%q)", command, f.Usage)
			}
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs([]string{command, "--grant-clock-offset=1h"})
			err = root.Execute()
			if err == nil {
				t.Fatalf("quotaplane %s --grant-clock-offset=1h succeeded; want an unknown flag", command)
			}
			for _, said := range []string{err.Error(), out.String()} {
				if !strings.Contains(said, "unknown flag: --grant-clock-offset") {
					t.Errorf("quotaplane %s --grant-clock-offset=1h: want \"unknown flag\", got %q", command, said)
				}
			}
		})
	}
}
