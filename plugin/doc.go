// Package plugin runs Halley's plugins: the scripts and binaries that admins upload and that nodes call before
// (pre) or after (after) they act, or as the whole work of an auto node.
//
// It has four parts, each usable alone:
//   - FileStore keeps uploaded plugin files by name, version and SHA-256 under one directory (a NAS mount in
//     production).
//   - Runner is the process contract of API.md ("Plugins"); ProcessRunner starts one child process per run in a
//     fresh working directory with a scrubbed environment, feeds it the JSON input, caps what it prints, and kills
//     its whole process group when it passes its timeout.
//   - Executor is a bounded worker pool that claims durable runs from a Queue (implemented by the store with
//     FOR UPDATE SKIP LOCKED and a lease), heartbeats their leases, runs them and hands the results back.
//   - LogStore keeps each run's output on disk by date and plugin, and purges whole days past retention.
//
// The package imports nothing of Halley's services: the executor declares the Queue it needs, so the engine and
// the store depend on plugin, never the other way round.
package plugin
