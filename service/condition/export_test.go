package condition

// MatchStrict is Match without its last-resort recover, so that tests (the fuzz test above all) see panics.
func MatchStrict(c *Condition, doc []byte) bool { return c.match(doc) }
