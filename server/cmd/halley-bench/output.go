package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// emit prints the human summary, then the figures as one JSON object on the last line.
func emit(w io.Writer, summary []string, figures any) error {
	var sb strings.Builder
	for _, l := range summary {
		sb.WriteString(l)
		sb.WriteByte('\n')
	}
	enc := json.NewEncoder(&sb) // one line, ending in a newline; ">=" stays readable
	enc.SetEscapeHTML(false)
	if err := enc.Encode(figures); err != nil {
		return fmt.Errorf("encode the figures: %w", err)
	}
	_, err := io.WriteString(w, sb.String())
	return err
}

// latencyLine renders one operation's latencies for the summary.
func latencyLine(name string, l Latency) string {
	s := fmt.Sprintf("  %-10s n=%-8d p50 %7.1f ms  p95 %7.1f ms  p99 %7.1f ms  max %7.1f ms  errors %d",
		name, l.Count, l.P50, l.P95, l.P99, l.Max, l.Errors)
	if len(l.Kinds) > 0 {
		s += " " + kindsString(l.Kinds)
	}
	return s
}

func kindsString(k map[string]int64) string {
	b, _ := json.Marshal(k) // map keys are sorted: stable output
	return string(b)
}

// targetLines renders targets as "ratio >= 0.5: 0.42 MISSED".
func targetLines(ts []Target) []string {
	out := make([]string, 0, len(ts))
	for _, t := range ts {
		v, verdict := "n/a", "NOT MEASURED"
		if t.Value != nil {
			v = fmtNum(*t.Value)
		}
		if t.Met != nil {
			verdict = "MISSED"
			if *t.Met {
				verdict = "met"
			}
		}
		out = append(out, fmt.Sprintf("  target %s %s: %s %s", t.Name, t.Want, v, verdict))
	}
	return out
}
