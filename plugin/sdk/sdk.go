// Package sdk ships the Python helper module for plugin authors, halley_plugin.py. The process runner writes it
// into every Python run's working directory (which is on PYTHONPATH), so a plugin uploaded alone can simply
// `import halley_plugin`.
package sdk

import _ "embed"

// FileName is the module's file name; `import halley_plugin` finds it.
const FileName = "halley_plugin.py"

//go:embed halley_plugin.py
var source []byte

// Python returns the source of halley_plugin.py (a fresh copy the caller may keep).
func Python() []byte { return append([]byte(nil), source...) }
