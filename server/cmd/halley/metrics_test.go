package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/halley-bpm/halley/internal/testkit"
)

// apiMetrics are the metric names API.md ("Operations", additions of 2026-11-25) binds /metrics to.
var apiMetrics = []string{"halley_steps_total", "halley_instances", "halley_timers_pending", "halley_timer_lateness_seconds",
	"halley_plugin_runs_total", "halley_plugin_run_seconds", "halley_outbox_pending", "halley_outbox_oldest_age_seconds",
	"halley_deliveries_failed_total"}

// opsDir is docs/ops, the dashboard and alert rules operators install.
var opsDir = filepath.Join("..", "..", "..", "docs", "ops")

// TestMetricsOfARealServer starts the binary, makes it run engine steps, and scrapes /metrics: API.md's metric
// names are there (the step counter with the steps' actions), promtool's linter accepts the exposition, and every
// metric docs/ops/grafana-dashboard.json and docs/ops/alerts.yml query is one the server exports.
func TestMetricsOfARealServer(t *testing.T) {
	bin := buildHalley(t)
	_, url, logs := start(t, bin, "HALLEY_ADMIN_PASSWORD=metrics-pw")
	tok := login(t, url, "admin", "metrics-pw")
	st, body := call(t, "POST", url+"/api/v1/instances/linear", tok, "application/json",
		strings.NewReader(`{"title":"metrics","steps":[{"name":"check","approvers":{"users":["admin"]}}]}`))
	if st != 201 {
		t.Fatalf("start: %d %s", st, body)
	}
	st, body = call(t, "GET", url+"/api/v1/tasks", tok, "", nil)
	var tasks struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.Unmarshal([]byte(body), &tasks); st != 200 || err != nil || len(tasks.Items) != 1 {
		t.Fatalf("tasks: %d %s", st, body)
	}
	if st, body = call(t, "POST", url+"/api/v1/tasks/"+tasks.Items[0].ID+"/approve", tok, "application/json", strings.NewReader(`{}`)); st != 200 {
		t.Fatalf("approve: %d %s", st, body)
	}

	st, exposition := call(t, "GET", url+"/metrics", "", "", nil)
	if st != 200 {
		t.Fatalf("/metrics: %d\n%s", st, logs)
	}
	families := map[string]bool{} // # TYPE names
	series := map[string]bool{}   // sample names (histograms' _bucket, _sum, _count)
	for _, line := range strings.Split(exposition, "\n") {
		if f, ok := strings.CutPrefix(line, "# TYPE "); ok {
			families[strings.Fields(f)[0]] = true
		} else if line != "" && !strings.HasPrefix(line, "#") {
			series[strings.FieldsFunc(line, func(r rune) bool { return r == '{' || r == ' ' })[0]] = true
		}
	}
	for _, m := range apiMetrics {
		if !families[m] {
			t.Errorf("/metrics lacks %s (API.md)", m)
		}
	}
	for _, want := range []string{`halley_steps_total{action="start",outcome="committed"} 1`, `halley_steps_total{action="approve",outcome="committed"} 1`,
		`halley_instances{status="running"} 0`, `halley_ready{check="database"} 1`, `halley_plugin_runs_total{status="failed"} 0`} {
		if !strings.Contains(exposition, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}

	promtool := testkit.RequireTool(t, "promtool", "")
	lint := exec.Command(promtool, "check", "metrics")
	lint.Stdin = strings.NewReader(exposition)
	if out, err := lint.CombinedOutput(); err != nil {
		t.Errorf("promtool check metrics: %v\n%s", err, out)
	}

	for _, q := range opsQueries(t) {
		for _, name := range metricNames(q.expr) {
			if !series[name] {
				t.Errorf("%s queries %s, which /metrics does not export (query %q)", q.file, name, q.expr)
			}
		}
	}
}

// TestAlertRules checks docs/ops/alerts.yml with promtool (syntax, templates) and runs its unit tests
// (docs/ops/alerts_test.yml: each alert fires on the series it is for).
func TestAlertRules(t *testing.T) {
	promtool := testkit.RequireTool(t, "promtool", "")
	for _, args := range [][]string{{"check", "rules", "alerts.yml"}, {"test", "rules", "alerts_test.yml"}} {
		cmd := exec.Command(promtool, args...)
		cmd.Dir = opsDir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

type opsQuery struct{ file, expr string }

// opsQueries are the PromQL expressions of the dashboard's panels and of the alert rules.
func opsQueries(t *testing.T) []opsQuery {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(opsDir, "grafana-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Type    string `json:"type"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var qs []opsQuery
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("dashboard panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			qs = append(qs, opsQuery{"grafana-dashboard.json panel " + p.Title, tg.Expr})
		}
	}
	rules, err := os.ReadFile(filepath.Join(opsDir, "alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// The rules file's expressions: a promtool-checked file, so a line scan for "expr:" and its block suffices.
	lines := strings.Split(string(rules), "\n")
	for i := 0; i < len(lines); i++ {
		rest, ok := strings.CutPrefix(strings.TrimSpace(lines[i]), "expr:")
		if !ok {
			continue
		}
		expr := strings.TrimSpace(rest)
		if expr == "|" {
			expr = ""
			for i+1 < len(lines) && strings.HasPrefix(lines[i+1], "            ") {
				i++
				expr += lines[i] + "\n"
			}
		}
		qs = append(qs, opsQuery{"alerts.yml", expr})
	}
	if len(qs) < 10 {
		t.Fatalf("only %d queries found in docs/ops", len(qs))
	}
	return qs
}

// metricName matches the names of Halley's own metrics and the Go and process collectors' in PromQL (label
// values and names such as "le" or "instance" do not start so; `up` is Prometheus's own).
var metricName = regexp.MustCompile(`\b(?:halley|go|process)_[a-z0-9_]+\b`)

func metricNames(expr string) []string {
	out := metricName.FindAllString(expr, -1)
	sort.Strings(out)
	return out
}
