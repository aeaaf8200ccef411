// Package didyoumean finds the likely intended name of a misspelt one:
// the "did you mean" of unknown option keys, agent file keys, undefined
// names, flags and providers.
package didyoumean

import "strings"

// Closest returns the name of names nearest to key when it is near enough
// to be a likely typo (an edit distance of at most a third of its length,
// at least 1), else "".
func Closest(key string, names []string) string {
	best, bestDist := "", max(1, len(key)/3)+1
	for _, n := range names {
		if d := editDistance(key, n); d < bestDist {
			best, bestDist = n, d
		}
	}
	return best
}

// UnknownName adds " (did you mean y?)" to an expr-lang compile message
// "unknown name x" when x is near one of names, the names of the
// expression's environment; any other message is returned as it is.
func UnknownName(msg string, names []string) string {
	rest, ok := strings.CutPrefix(msg, "unknown name ")
	if !ok {
		return msg
	}
	name, _, _ := strings.Cut(rest, " ")
	if near := Closest(name, names); near != "" {
		return msg + " (did you mean " + near + "?)"
	}
	return msg
}

// editDistance is the Levenshtein distance of a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
