//go:build !quotaplane_testhooks

package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestTheShippedBinaryHasNoTestFlags: the shipped build's serve and
// controller refuse --grant-clock-offset, and its webhook
// --quota-token-refresh-every, flags only test builds have (testhooks.go,
// tag quotaplane_testhooks): the command fails, as the binary exits 1,
// saying the flag is unknown.
func TestTheShippedBinaryHasNoTestFlags(t *testing.T) {
	for command, flag := range map[string]string{"serve": "grant-clock-offset", "controller": "grant-clock-offset", "webhook": "quota-token-refresh-every"} {
		t.Run(command, func(t *testing.T) {
			root := newRootCommand()
			sub, _, err := root.Find([]string{command})
			if err != nil {
				t.Fatal(err)
			}
			// Checked first: with the flag, the command would start.
			if f := sub.Flags().Lookup(flag); f != nil {
				t.Fatalf("quotaplane %s has the test flag --%s (%q)", command, flag, f.Usage)
			}
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetErr(&out)
			root.SetArgs([]string{command, "--" + flag + "=1h"})
			err = root.Execute()
			if err == nil {
				t.Fatalf("quotaplane %s --%s=1h succeeded; want an unknown flag", command, flag)
			}
			for _, said := range []string{err.Error(), out.String()} {
				if !strings.Contains(said, "unknown flag: --"+flag) {
					t.Errorf("quotaplane %s --%s=1h: want \"unknown flag\", got %q", command, flag, said)
				}
			}
		})
	}
}
