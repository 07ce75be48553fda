package plugin_test

import (
	"strings"
	"testing"

	"github.com/halley-bpm/halley/plugin"
)

// TestNewSandboxRefusesImpossibleConfigurations: a configuration no host could run stops the start with a message
// that names the value; nothing is probed, created or changed for it.
func TestNewSandboxRefusesImpossibleConfigurations(t *testing.T) {
	valid := func() plugin.SandboxConfig {
		c := plugin.DefaultSandboxConfig(4)
		c.WorkRoot = "/nonexistent/halley-plugins"
		return c
	}
	for _, tc := range []struct {
		name string
		mod  func(*plugin.SandboxConfig)
		want string
	}{
		{"no work root", func(c *plugin.SandboxConfig) { c.WorkRoot = "" }, `WorkRoot "" must be an absolute path`},
		{"relative work root", func(c *plugin.SandboxConfig) { c.WorkRoot = "data/plugin-work" }, `WorkRoot "data/plugin-work" must be an absolute path`},
		{"no uids", func(c *plugin.SandboxConfig) { c.UIDs = 0 }, "UIDs is 0"},
		{"negative uid", func(c *plugin.SandboxConfig) { c.UID = -5 }, "the uid range from -5 for 4 runs"},
		{"uid range past the top", func(c *plugin.SandboxConfig) { c.UID = 1<<31 - 2 }, "the uid range from 2147483646 for 4 runs does not fit"},
		{"negative gid", func(c *plugin.SandboxConfig) { c.GID = -1 }, "GID -1"},
		{"negative limit", func(c *plugin.SandboxConfig) { c.OpenFiles = -1 }, "OpenFiles is -1"},
		{"relative cgroup", func(c *plugin.SandboxConfig) { c.Cgroup = "halley" }, `Cgroup "halley" must be an absolute path`},
		{"relative private path", func(c *plugin.SandboxConfig) { c.PrivatePaths = []string{"/srv/halley", "data"} }, `private path "data" must be absolute`},
		{"relative interpreter path", func(c *plugin.SandboxConfig) { c.Python = "venv/bin/python3" }, `Python "venv/bin/python3"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := valid()
			tc.mod(&c)
			sb, err := plugin.NewSandbox(c)
			if err == nil || sb != nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("NewSandbox: %v, %v; want an error containing %q", sb, err, tc.want)
			}
		})
	}
	// Several mistakes are named together.
	c := valid()
	c.UIDs, c.WorkRoot = 0, ""
	if _, err := plugin.NewSandbox(c); err == nil || !strings.Contains(err.Error(), "UIDs is 0") || !strings.Contains(err.Error(), "WorkRoot") {
		t.Fatalf("two mistakes: %v", err)
	}
}
