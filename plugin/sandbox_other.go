//go:build !linux

package plugin

import (
	"context"
	"errors"
	"os"
)

// Sandbox confines plugin runs; outside Linux it confines nothing (and the process runner itself needs Linux).
type Sandbox struct {
	cfg    SandboxConfig
	report SandboxReport
}

// NewSandbox reports that nothing is in force: plugins run only on Linux.
func NewSandbox(cfg SandboxConfig) (*Sandbox, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	why := "plugin runs need Linux"
	r := SandboxReport{Refused: why, UIDs: "", GID: cfg.GID, WorkDir: cfg.WorkRoot, HalleyUID: os.Geteuid()}
	for _, n := range []string{ProtectUser, ProtectPrivate, ProtectProcess, ProtectEnvironment, ProtectLimits, ProtectCgroup, ProtectLeftovers, ProtectNetwork, ProtectUnixSockets, ProtectPrivateTmp} {
		r.Protections = append(r.Protections, Protection{Name: n, Detail: why})
	}
	return &Sandbox{cfg: cfg, report: r}, nil
}

// WorkRoot is the parent of the runs' working directories.
func (s *Sandbox) WorkRoot() string { return s.cfg.WorkRoot }

func (s *Sandbox) begin(context.Context, Spec) (any, error) {
	return nil, errors.New("plugin runs need Linux")
}

// Settle and Close have nothing to wait for outside Linux.
func (s *Sandbox) Settle() {}

// Close: see Settle.
func (s *Sandbox) Close() {}
