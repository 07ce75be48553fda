package plugin_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
	"github.com/halley-bpm/halley/plugin"
)

// requirePython fails under CI and skips elsewhere when no python3 is on the plugins' PATH.
func requirePython(t *testing.T) {
	t.Helper()
	testkit.RequirePython(t, plugin.DefaultPath)
}

// writeFile writes a plugin file into a fresh temp dir and returns its absolute path.
func writeFile(t *testing.T, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func pythonSpec(t *testing.T, source string) plugin.Spec {
	t.Helper()
	requirePython(t)
	return plugin.Spec{Name: "test-py", Version: 1, Runtime: plugin.RuntimePython,
		Path: writeFile(t, "plugin.py", source, 0o644)}
}

func shellSpec(t *testing.T, script string) plugin.Spec {
	t.Helper()
	return plugin.Spec{Name: "test-sh", Version: 1, Runtime: plugin.RuntimeBinary,
		Path: writeFile(t, "plugin.sh", "#!/bin/sh\n"+script, 0o755)}
}

func newRunner(t *testing.T) *plugin.ProcessRunner {
	t.Helper()
	r := &plugin.ProcessRunner{WorkRoot: filepath.Join(t.TempDir(), "work")}
	t.Cleanup(r.Close)
	return r
}

func input(runID string, ctx string) plugin.Input {
	return plugin.Input{RunID: runID, InstanceID: "inst-1", NodeID: "grant", Phase: "after",
		Context: json.RawMessage(ctx), Node: json.RawMessage(`{"id":"grant","type":"auto"}`),
		CallbackURL: "http://127.0.0.1:9/api/v1/callback/inst-1/ni-1?token=x"}
}

func run(t *testing.T, r plugin.Runner, spec plugin.Spec, in plugin.Input) plugin.Result {
	t.Helper()
	return r.Run(context.Background(), spec, in)
}

func mustSucceed(t *testing.T, res plugin.Result) *plugin.Output {
	t.Helper()
	if res.Err != nil || res.Output == nil {
		t.Fatalf("run failed: err=%v exit=%d stdout=%q stderr=%q", res.Err, res.ExitCode, res.Stdout, res.Stderr)
	}
	if res.Status() != plugin.StatusSucceeded || res.ExitCode != 0 {
		t.Fatalf("status %s exit %d, want succeeded 0", res.Status(), res.ExitCode)
	}
	return res.Output
}

func mustFailWith(t *testing.T, res plugin.Result, parts ...string) {
	t.Helper()
	if res.Err == nil {
		t.Fatalf("run succeeded, want an error containing %q; stdout=%q", parts, res.Stdout)
	}
	if res.Output != nil {
		t.Errorf("failed run has Output %+v", res.Output)
	}
	for _, p := range parts {
		if !strings.Contains(res.Err.Error(), p) {
			t.Errorf("error %q does not mention %q", res.Err, p)
		}
	}
}
