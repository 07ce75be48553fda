// Command halley-bench measures a running Halley over HTTP: the approval-step throughput of seeds/004's
// scenario against a raw-commit baseline on the same database (steps), timer lateness and loss with many
// pending timers (timers), plugin runs against a bare python3 spawn loop (plugins), and the retention sweep's rate
// beside a step load (sweep). See docs/benchmarks.md.
//
// Each suite prints a human summary and, as its last line, one JSON object with its figures. Every loop is
// bounded in count and in time, and the tool only talks to loopback addresses.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `usage: halley-bench <suite> [flags]

suites:
  steps     seeds/004's scenario: start an instance of a 4-approval template and approve each step
            (--clients, --duration; --baseline --mysql URL adds the raw-commit baseline and the ratios)
  timers    arm --n timers spread over --window while a background step load runs (--storm: all due in
            one second); lateness, fired vs armed, duplicates, Redis memory, Halley RSS
  plugins   --runs R of a trivial Python plugin through Halley at --concurrency C vs a bare python3 loop
  sweep     make --instances finished instances, then run the retention sweep in this process (on --mysql)
            with a step load beside it: database and archive bytes per instance, instances archived per
            second, steps/s during the sweep against the load alone
  sqlstep   the steps suite's flow as the SQL the store sends, on --mysql with no Halley: the database's own
            cost per step and the steps ratio it allows at all (--read locked|cached|none, --history,
            --notifications, --baseline)

Run "halley-bench <suite> -h" for the flags of a suite.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, errUsage) {
			fmt.Fprintln(os.Stderr, "halley-bench:", err)
		}
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return errUsage
	}
	switch args[0] {
	case "steps":
		return runSteps(ctx, args[1:], stdout, stderr)
	case "timers":
		return runTimers(ctx, args[1:], stdout, stderr)
	case "plugins":
		return runPlugins(ctx, args[1:], stdout, stderr)
	case "sweep":
		return runSweep(ctx, args[1:], stdout, stderr)
	case "sqlstep":
		return runSQLStep(ctx, args[1:], stdout, stderr)
	case "-h", "--help", "help":
		fmt.Fprint(stdout, usage)
		return nil
	}
	fmt.Fprint(stderr, usage)
	return fmt.Errorf("unknown suite %q", args[0])
}
