package policy

import (
	"strings"
	"testing"
)

func TestParseAmount(t *testing.T) {
	units := func(rt string) (string, bool) {
		switch rt {
		case "memory":
			return "1Mi", true
		case "cpu":
			return "1m", true
		case "cores":
			return "1", true
		}
		return "", false
	}
	cases := []struct {
		in, rt string
		want   int64
		err    string
	}{
		{"4096", "memory", 4096, ""},
		{"2Gi", "memory", 2048, ""},
		{"512Mi", "memory", 512, ""},
		{"1.5Gi", "memory", 1536, ""},
		{"500m", "cpu", 500, ""},
		{"2", "cpu", 2, ""}, // a plain integer is base units
		{"1.5", "cpu", 1500, ""},
		{"4", "cores", 4, ""},
		{"1500Ki", "memory", 0, "not a whole number of base units"},
		{"500m", "cores", 0, "not a whole number of base units"},
		{"2Gi", "disks", 0, "declares no spec.baseUnitQuantity"},
		{"0", "memory", 0, "must be positive"},
		{"-1Gi", "memory", 0, "must be positive"},
		{"lots", "memory", 0, "neither a whole number"},
		{"9Ei", "cpu", 0, "more base units than an amount can hold"},
	}
	for _, tc := range cases {
		got, err := ParseAmount(tc.in, tc.rt, units)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseAmount(%q, %s) = %d, %v; want an error containing %q", tc.in, tc.rt, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseAmount(%q, %s) = %d, %v; want %d", tc.in, tc.rt, got, err, tc.want)
		}
	}
}
