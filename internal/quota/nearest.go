package quota

import "strings"

// Nearest is the name in known closest to name, when it is close enough to
// be a typo of it (at most a third of its letters differ, case aside), or
// "". Messages use it to say "did you mean …?".
func Nearest(name string, known []string) string {
	best, bestD := "", len(name)/3+1
	for _, k := range known {
		if k == name {
			continue
		}
		if d := distance(strings.ToLower(name), strings.ToLower(k)); d < bestD {
			best, bestD = k, d
		}
	}
	return best
}

// distance is the Levenshtein distance between a and b.
func distance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
