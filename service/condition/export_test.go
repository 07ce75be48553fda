package condition

// MatchStrict is Match without its last-resort recover, so that tests (the fuzz test above all) see panics.
func MatchStrict(c *Condition, doc []byte) bool { return c.match(doc) }

// MatchWithoutIndex matches without the one-pass index of top-level fields, finding every field with
// gjson.Get; tests check that both ways agree.
func MatchWithoutIndex(c *Condition, doc []byte) bool { return c.matchIndexed(doc, false) }
