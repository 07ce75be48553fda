package server_test

import (
	"bytes"
	"compress/gzip"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/halley-bpm/halley/server"
	"github.com/halley-bpm/halley/service/store"
	"github.com/halley-bpm/halley/service/store/storetest"
)

func gz(s string) []byte {
	var b bytes.Buffer
	w := gzip.NewWriter(&b)
	_, _ = w.Write([]byte(s))
	_ = w.Close()
	return b.Bytes()
}

// TestUICompression: the web app's files go out as their precompressed twin (brotli, else gzip) when the client
// accepts it, with Content-Encoding, Vary and the file's own type; hashed assets keep their year-long cache, the
// page its no-cache; serving them logs at debug level only.
func TestUICompression(t *testing.T) {
	const js = "console.log('halley')"
	ui := fstest.MapFS{
		"index.html":              {Data: []byte("<!doctype html><title>Halley</title>")},
		"index.html.gz":           {Data: gz("<!doctype html><title>Halley</title>")},
		"assets/app-1a2b3c.js":    {Data: []byte(js)},
		"assets/app-1a2b3c.js.br": {Data: []byte("BROTLI-BYTES")},
		"assets/app-1a2b3c.js.gz": {Data: gz(js)},
		"assets/logo-9f8e.png":    {Data: []byte("\x89PNG....")},
	}
	var logs lockedBuffer
	e := newEnv(t, storetest.Open(t, store.SQLite), func(d *server.Deps) {
		d.UI = http.FS(ui)
		d.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelInfo}))
	})
	// A raw transport: Go's client would ask for gzip itself and decode the answer.
	get := func(path, accept string) (*http.Response, []byte) {
		req, _ := http.NewRequest("GET", e.url+path, nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, b
	}
	for _, c := range []struct {
		path, accept, encoding string
		body                   []byte
	}{
		{"/assets/app-1a2b3c.js", "gzip, deflate, br, zstd", "br", []byte("BROTLI-BYTES")},
		{"/assets/app-1a2b3c.js", "gzip", "gzip", gz(js)},
		{"/assets/app-1a2b3c.js", "br;q=0, gzip;q=0.8", "gzip", gz(js)},
		{"/assets/app-1a2b3c.js", "*", "br", []byte("BROTLI-BYTES")},
		{"/assets/app-1a2b3c.js", "*;q=0", "", []byte(js)},
		{"/assets/app-1a2b3c.js", "", "", []byte(js)},
		{"/assets/app-1a2b3c.js", "identity", "", []byte(js)},
		{"/inbox", "gzip, br", "gzip", gz("<!doctype html><title>Halley</title>")},           // history routing: the page, compressed
		{"/assets/app-1a2b3c.js.br", "", "", []byte("<!doctype html><title>Halley</title>")}, // twins are not files of the app
	} {
		res, body := get(c.path, c.accept)
		if res.StatusCode != 200 || res.Header.Get("Content-Encoding") != c.encoding || !bytes.Equal(body, c.body) {
			t.Errorf("GET %s (Accept-Encoding %q): %d %q %q", c.path, c.accept, res.StatusCode, res.Header.Get("Content-Encoding"), body)
		}
		if strings.HasSuffix(c.path, ".js") {
			if ct := res.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/javascript") {
				t.Errorf("GET %s: Content-Type %q", c.path, ct)
			}
			if res.Header.Get("Cache-Control") != "public, max-age=31536000, immutable" || res.Header.Get("Vary") != "Accept-Encoding" {
				t.Errorf("GET %s: Cache-Control %q, Vary %q", c.path, res.Header.Get("Cache-Control"), res.Header.Get("Vary"))
			}
		}
	}
	res, _ := get("/inbox", "br")
	if res.Header.Get("Cache-Control") != "no-cache" || res.Header.Get("Content-Encoding") != "" || !strings.HasPrefix(res.Header.Get("Content-Type"), "text/html") {
		t.Errorf("the page without a brotli twin: %v", res.Header)
	}
	// A file without twins: no Vary, no encoding.
	res, _ = get("/assets/logo-9f8e.png", "gzip, br")
	if res.Header.Get("Content-Encoding") != "" || res.Header.Get("Vary") != "" || res.Header.Get("Content-Type") != "image/png" {
		t.Errorf("png: %v", res.Header)
	}
	// Compressed answers have their own ETag, and revalidate.
	res, _ = get("/assets/app-1a2b3c.js", "gzip")
	etag := res.Header.Get("ETag")
	if etag == "" || etag == res2etag(get("/assets/app-1a2b3c.js", "br")) || etag == res2etag(get("/assets/app-1a2b3c.js", "")) {
		t.Fatalf("the gzip twin's ETag %q is not its own", etag)
	}
	req, _ := http.NewRequest("GET", e.url+"/assets/app-1a2b3c.js", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	req.Header.Set("If-None-Match", etag)
	if res, err := (&http.Transport{DisableCompression: true}).RoundTrip(req); err != nil || res.StatusCode != 304 {
		t.Fatalf("revalidation: %v %v", res, err)
	}
	if l := logs.String(); strings.Contains(l, "app-1a2b3c") || strings.Contains(l, "path=/inbox") {
		t.Fatalf("static files logged at info level:\n%s", l)
	}
	if l := logs.String(); !strings.Contains(l, "/api/v1/auth/login") {
		t.Fatalf("API calls are no longer logged:\n%s", l)
	}
}

func res2etag(res *http.Response, _ []byte) string { return res.Header.Get("ETag") }
