package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/halley-bpm/halley/internal/testkit"
)

// TestStepsSuiteAgainstHalley runs the steps suite small against a real Halley (the binary, embedded SQLite), once
// through each HTTP client of the load: every step is counted, none fails, and flows of a start and four
// approvals complete — the lean client's requests and its reading of the answers (the next task in next_tasks)
// are what the server expects.
func TestStepsSuiteAgainstHalley(t *testing.T) {
	bin := testkit.GoBuild(t, "../halley", ".", "halley")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(bin)
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HALLEY_ADDR=" + addr, "HALLEY_DATA_DIR=" + t.TempDir(), "HALLEY_ADMIN_PASSWORD=bench-test-pw"}
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	url := "http://" + addr
	if !testkit.Eventually(30*time.Second, 50*time.Millisecond, func() bool {
		r, err := http.Get(url + "/readyz")
		if err != nil {
			return false
		}
		r.Body.Close()
		return r.StatusCode == http.StatusOK
	}) {
		t.Fatalf("/readyz never became 200; logs:\n%s", logs.String())
	}

	for _, mode := range []string{"lean", "std"} {
		t.Run(mode, func(t *testing.T) {
			var out, errs bytes.Buffer
			args := []string{"--url", url, "--admin-password", "bench-test-pw", "--clients", "3", "--duration", "2s", "--warmup", "0s", "--http", mode}
			if err := runSteps(context.Background(), args, &out, &errs); err != nil {
				t.Fatalf("steps: %v\n%s", err, errs.String())
			}
			lines := strings.Split(strings.TrimSpace(out.String()), "\n")
			var fig StepsFigures
			if err := json.Unmarshal([]byte(lines[len(lines)-1]), &fig); err != nil {
				t.Fatalf("last line %q: %v", lines[len(lines)-1], err)
			}
			if fig.Errors != 0 || fig.Steps == 0 || fig.FlowsDone == 0 || fig.Ops["approve"].Count < 4*fig.FlowsDone {
				t.Fatalf("figures: steps %d, errors %d, flows %d, approvals %d\n%s", fig.Steps, fig.Errors, fig.FlowsDone, fig.Ops["approve"].Count, out.String())
			}
			// Every approval's answer named the next task: the load never had to look one up.
			if n := fig.Ops["next_task"].Count; n != 0 {
				t.Fatalf("%d task look-ups: the answers' next_tasks were not read", n)
			}
		})
	}
	if err := runSteps(context.Background(), []string{"--url", url, "--http", "fast"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Fatal("an unknown --http mode was accepted")
	}
}
