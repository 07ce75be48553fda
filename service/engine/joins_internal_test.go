package engine

import "testing"

// TestJoinFunctions pins each join kind's verdict over the tallies that matter (API.md "Semantics changes").
func TestJoinFunctions(t *testing.T) {
	tl := func(taken, pruned, killed, open int) edgeTally { return edgeTally{taken, pruned, killed, open} }
	tests := []struct {
		name  string
		join  string
		min   int
		tally edgeTally
		want  joinVerdict
	}{
		// and: the synchronizing merge.
		{"and: all taken", "and", 0, tl(2, 0, 0, 0), joinFire},
		{"and: taken and pruned merge", "and", 0, tl(1, 2, 0, 0), joinFire},
		{"and: one still open waits", "and", 0, tl(1, 1, 0, 1), joinWait},
		{"and: nothing decided yet", "and", 0, tl(0, 0, 0, 3), joinWait},
		{"and: one killed skips at once, even with open edges", "and", 0, tl(1, 0, 1, 1), joinSkipKilled},
		{"and: killed beats pruned", "and", 0, tl(0, 2, 1, 0), joinSkipKilled},
		{"and: all pruned skips as pruned", "and", 0, tl(0, 3, 0, 0), joinSkipPruned},
		{"and: in-degree one, taken", "and", 0, tl(1, 0, 0, 0), joinFire},
		{"and: in-degree one, pruned", "and", 0, tl(0, 1, 0, 0), joinSkipPruned},
		// or: the first taken edge.
		{"or: first taken fires", "or", 0, tl(1, 0, 0, 2), joinFire},
		{"or: taken with a killed sibling fires", "or", 0, tl(1, 0, 1, 0), joinFire},
		{"or: killed but one open waits", "or", 0, tl(0, 0, 1, 1), joinWait},
		{"or: none can be taken, one killed", "or", 0, tl(0, 1, 1, 0), joinSkipKilled},
		{"or: none can be taken, all pruned", "or", 0, tl(0, 2, 0, 0), joinSkipPruned},
		// min N.
		{"min 2: two taken fire", "min", 2, tl(2, 0, 0, 1), joinFire},
		{"min 2: two taken of three with one pruned", "min", 2, tl(2, 1, 0, 0), joinFire},
		{"min 2: one taken, one open waits", "min", 2, tl(1, 1, 0, 1), joinWait},
		{"min 2: one taken, rest pruned: skipped as pruned", "min", 2, tl(1, 2, 0, 0), joinSkipPruned},
		{"min 2: one taken, one killed, one pruned: skipped as killed", "min", 2, tl(1, 1, 1, 0), joinSkipKilled},
		{"min 2: killed but enough still open waits", "min", 2, tl(0, 0, 1, 2), joinWait},
		{"min 1 behaves as or", "min", 1, tl(1, 0, 0, 2), joinFire},
		{"min 3 of 3 needs all", "min", 3, tl(2, 0, 0, 1), joinWait},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := joins[tc.join](tc.tally, tc.min); got != tc.want {
				t.Fatalf("%s(%+v, min %d) = %s, want %s", tc.join, tc.tally, tc.min, got, tc.want)
			}
		})
	}
}
