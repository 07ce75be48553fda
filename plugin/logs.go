package plugin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/halley-bpm/halley/model"
)

// dateLayout names the day folders of the log store (UTC).
const dateLayout = "2006-01-02"

// LogStore keeps plugin run logs on the local disk as <Dir>/<YYYY-MM-DD>/<plugin>/<run-id>.log (seed 003: by date and plugin, so
// a day is purged by removing one folder and a plugin's runs of a day are read from one). The date is the UTC
// day the run started. Every attempt of a run is appended to its file, start and end times written by Halley.
type LogStore struct {
	Dir string
}

var _ RunLog = (*LogStore)(nil)

// runIDPattern keeps run ids to one harmless path element (engine run ids look like <instance uuid>.r<n>).
var runIDPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Path returns the log file of run runID of plugin on day (UTC). It checks the arguments (EINVALID), not that
// the file exists.
func (s *LogStore) Path(day time.Time, plugin, runID string) (string, error) {
	if err := ValidName(plugin); err != nil {
		return "", err
	}
	if !runIDPattern.MatchString(runID) || strings.Contains(runID, "..") {
		return "", model.Errorf(model.EINVALID, "plugin run id %q is not a valid id", runID)
	}
	return filepath.Join(s.Dir, day.UTC().Format(dateLayout), plugin, runID+".log"), nil
}

// Write implements RunLog: it appends the record of one finished attempt to its run's file.
func (s *LogStore) Write(_ context.Context, job Job, res Result) error {
	_, err := s.WriteFile(job, res)
	return err
}

// WriteFile appends the record of one finished attempt to its run's log and returns the file's path.
func (s *LogStore) WriteFile(job Job, res Result) (string, error) {
	day := res.StartedAt
	if day.IsZero() {
		day = time.Now()
	}
	p, err := s.Path(day, job.Spec.Name, job.RunID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		return "", fmt.Errorf("plugin: unable to create log folder: %w", err)
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o640)
	if err != nil {
		return "", fmt.Errorf("plugin: unable to open run log: %w", err)
	}
	// One write per record, so two attempts of the same run never interleave their lines.
	if _, err := f.Write(FormatRecord(job, res)); err != nil {
		_ = f.Close()
		return "", fmt.Errorf("plugin: unable to write run log: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("plugin: unable to close run log: %w", err)
	}
	return p, nil
}

// FormatRecord is the text of one finished attempt of a run: what ran, when, how it ended, and its stdout and
// stderr (as kept: truncated at the output cap).
func FormatRecord(job Job, res Result) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "=== run %s attempt %d ===\n", job.RunID, job.Attempt)
	fmt.Fprintf(&b, "plugin:      %s v%d (%s)\n", job.Spec.Name, job.Spec.Version, job.Spec.Runtime)
	fmt.Fprintf(&b, "instance:    %s\n", job.Input.InstanceID)
	fmt.Fprintf(&b, "node:        %s\n", job.Input.NodeID)
	fmt.Fprintf(&b, "phase:       %s\n", job.Input.Phase)
	fmt.Fprintf(&b, "started_at:  %s\n", res.StartedAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&b, "ended_at:    %s\n", res.EndedAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(&b, "duration:    %s\n", res.Duration())
	fmt.Fprintf(&b, "status:      %s\n", res.Status())
	if res.Stopped != "" {
		fmt.Fprintf(&b, "stopped:     %s\n", res.Stopped)
	}
	fmt.Fprintf(&b, "exit_code:   %d\n", res.ExitCode)
	if res.Err != nil {
		fmt.Fprintf(&b, "error:       %s\n", res.Err)
	}
	writeStream(&b, "stdout", res.Stdout, res.StdoutTruncated)
	writeStream(&b, "stderr", res.Stderr, res.StderrTruncated)
	fmt.Fprintf(&b, "=== end run %s attempt %d ===\n\n", job.RunID, job.Attempt)
	return b.Bytes()
}

func writeStream(b *bytes.Buffer, name string, data []byte, truncated bool) {
	note := ""
	if truncated {
		note = ", truncated"
	}
	fmt.Fprintf(b, "--- %s (%d bytes%s) ---\n", name, len(data), note)
	b.Write(data)
	if len(data) > 0 && data[len(data)-1] != '\n' {
		b.WriteByte('\n')
	}
}

// Read returns the log of run runID of plugin on day; a missing log is ENOTFOUND.
func (s *LogStore) Read(day time.Time, plugin, runID string) ([]byte, error) {
	p, err := s.Path(day, plugin, runID)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, model.CodedError(model.ENOTFOUND, "plugin_log_not_found", "no log for run %s of %s on %s",
			runID, plugin, day.UTC().Format(dateLayout))
	}
	if err != nil {
		return nil, fmt.Errorf("plugin: unable to read run log: %w", err)
	}
	return b, nil
}

// Purge removes every day folder whose whole day (UTC) lies before olderThan and returns how many it removed.
// Folders that are not named like a date are left alone.
func (s *LogStore) Purge(olderThan time.Time) (removed int, err error) {
	entries, err := os.ReadDir(s.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("plugin: unable to list run logs: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		day, perr := time.Parse(dateLayout, e.Name())
		if perr != nil || day.Format(dateLayout) != e.Name() {
			continue
		}
		if day.AddDate(0, 0, 1).After(olderThan) {
			continue // part of that day is still within retention
		}
		if rerr := os.RemoveAll(filepath.Join(s.Dir, e.Name())); rerr != nil {
			errs = append(errs, rerr)
			continue
		}
		removed++
	}
	if len(errs) > 0 {
		return removed, fmt.Errorf("plugin: unable to purge run logs: %w", errors.Join(errs...))
	}
	return removed, nil
}

// RunLogStore keeps run log records where every replica reads them: the store's plugin_run_logs table.
type RunLogStore interface {
	// AppendRunLog stores the record of one attempt (a second record of the same attempt is ignored).
	AppendRunLog(ctx context.Context, l *model.PluginRunLog) error
}

// DBLog is the RunLog of a deployment: the record of every finished attempt goes into the database, where the
// log of a run is readable from every replica (GET /plugin-runs/{id}/log), whichever replica ran it.
type DBLog struct {
	st RunLogStore
}

var _ RunLog = (*DBLog)(nil)

// NewDBLog returns the run log kept in st.
func NewDBLog(st RunLogStore) (*DBLog, error) {
	if st == nil {
		return nil, errors.New("plugin: the run log needs a store")
	}
	return &DBLog{st: st}, nil
}

// Write implements RunLog.
func (l *DBLog) Write(ctx context.Context, job Job, res Result) error {
	// The run's own context may be ending (shutdown); a finished attempt's record is still worth keeping.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	return l.st.AppendRunLog(ctx, l.Record(job, res))
}

// Record is the row Write stores for an attempt (a LoggingQueue writes it with the run's result instead).
func (l *DBLog) Record(job Job, res Result) *model.PluginRunLog {
	tenant := job.TenantID
	if tenant == "" {
		tenant = model.DefaultTenant
	}
	return &model.PluginRunLog{RunID: job.RunID, Attempt: job.Attempt, TenantID: tenant, Plugin: job.Spec.Name,
		InstanceID: job.Input.InstanceID, Record: string(FormatRecord(job, res)), CreatedAt: res.StartedAt}
}
