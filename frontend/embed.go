// Package frontend embeds the built web/H5 app (frontend/dist, produced by `npm run build`) into the binary.
package frontend

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist returns the built app's files rooted at dist/. Before the first build it holds only a placeholder.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // cannot happen: "dist" is a literal directory embedded above
	}
	return sub
}

// Built reports whether dist holds a real build (an index.html), not just the placeholder.
func Built() bool {
	_, err := fs.Stat(Dist(), "index.html")
	return err == nil
}
