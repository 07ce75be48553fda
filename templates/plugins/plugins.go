// Package plugins embeds the example plugins that Halley's ready-made templates call (create-cache for the
// cache-resource-change template), so the command that loads the templates can upload them as well.
package plugins

import (
	"embed"
	"fmt"
	"io/fs"
	"path"
	"strings"
)

//go:embed *.py
var files embed.FS

// File is one example plugin, ready for POST /api/v1/plugins.
type File struct {
	Name    string // plugin name: the file name without its extension, e.g. "create-cache"
	Runtime string // "python"
	File    string // the embedded file name
	Source  []byte
}

// All returns every embedded example plugin, sorted by name.
func All() ([]File, error) {
	names, err := fs.Glob(files, "*.py")
	if err != nil {
		return nil, fmt.Errorf("plugins: list: %w", err)
	}
	out := make([]File, 0, len(names))
	for _, name := range names {
		src, err := files.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("plugins: read %s: %w", name, err)
		}
		out = append(out, File{Name: strings.TrimSuffix(name, path.Ext(name)), Runtime: "python", File: name, Source: src})
	}
	return out, nil
}
