package store

// The statements of the re-arm, for the EXPLAIN test (timers_test.go).
var (
	PendingTimersSQL        = pendingTimersSQL
	PendingTimersCreatedSQL = pendingTimersCreatedSQL
)
