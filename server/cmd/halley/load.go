package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"strings"
	"time"

	"github.com/halley-bpm/halley/server/config"
	"github.com/halley-bpm/halley/service/template"
	"github.com/halley-bpm/halley/templates"
	exampleplugins "github.com/halley-bpm/halley/templates/plugins"
)

// loadTemplates implements `halley templates load`: it uploads the example plugins, then creates (or updates the
// draft of) every ready-made template in a running Halley through its HTTP API and publishes it. Unchanged
// plugins and templates are left alone, so running it again is a no-op.
//
// It finds the server the way `halley serve` would describe it, from the same configuration file and HALLEY_*
// environment: --url, else HALLEY_PUBLIC_URL, else http://HALLEY_ADDR (0.0.0.0 and :: become 127.0.0.1); it logs
// in as --user with --password, else the configured admin password (HALLEY_ADMIN_PASSWORD, default admin).
// cfgPath is the --config given before the command; one given after it wins.
func loadTemplates(ctx context.Context, args []string, cfgPath string, getenv func(string) string, out io.Writer) error {
	fs := flag.NewFlagSet("templates load", flag.ContinueOnError)
	fs.SetOutput(out)
	url := fs.String("url", "", "Halley's base URL (default: HALLEY_PUBLIC_URL, else http://HALLEY_ADDR, as halley serve reads them)")
	cfgFile := fs.String("config", cfgPath, "YAML configuration file of the Halley to load into (HALLEY_* environment variables override it)")
	user := fs.String("user", "admin", "admin username")
	password := fs.String("password", "", "admin password (default: HALLEY_ADMIN_PASSWORD or admin_password of the configuration, else admin)")
	token := fs.String("token", "", "an admin API token instead of user and password")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("templates load takes no arguments (got %q); see halley templates load -h", fs.Args())
	}
	cfg, err := config.Load(*cfgFile, getenv)
	if err != nil {
		return err
	}
	base := strings.TrimRight(*url, "/")
	if base == "" {
		base = cfg.LocalURL()
	}
	fmt.Fprintf(out, "loading the ready-made templates into %s\n", base)
	c := &apiClient{base: base, hc: &http.Client{Timeout: 30 * time.Second}, token: *token}
	if c.token == "" {
		pw := *password
		if pw == "" {
			pw = cfg.AdminPassword
		}
		var login struct {
			Token string `json:"token"`
		}
		st, body, err := c.do(ctx, "POST", "/api/v1/auth/login", map[string]string{"username": *user, "password": pw}, &login)
		if err != nil {
			return fmt.Errorf("unable to reach Halley at %s: %v\n(is it running? point at it with --url, HALLEY_PUBLIC_URL or HALLEY_ADDR)", base, err)
		}
		if st != http.StatusOK {
			return fmt.Errorf("log in to %s as %s: %d %s\n(give the password with --password or HALLEY_ADMIN_PASSWORD, or an admin API token with --token)", base, *user, st, body)
		}
		c.token = login.Token
	}
	// The example plugins first: templates name them.
	pls, err := exampleplugins.All()
	if err != nil {
		return err
	}
	for _, p := range pls {
		sum := sha256.Sum256(p.Source)
		var cur struct {
			SHA256  string `json:"sha256"`
			Version int    `json:"version"`
		}
		if st, _, _ := c.do(ctx, "GET", "/api/v1/plugins/"+p.Name, nil, &cur); st == 200 && cur.SHA256 == hex.EncodeToString(sum[:]) {
			fmt.Fprintf(out, "unchanged plugin %s version %d\n", p.Name, cur.Version)
			continue
		}
		st, body, err := c.upload(ctx, p.Name, p.Runtime, p.File, p.Source)
		if err != nil || st != http.StatusCreated {
			return fmt.Errorf("upload plugin %s: %v %d %s", p.Name, err, st, body)
		}
		fmt.Fprintf(out, "uploaded plugin %s\n", p.Name)
	}
	all, err := templates.Ordered() // a sub-process's template before its callers
	if err != nil {
		return err
	}
	for _, t := range all {
		st, body, err := c.do(ctx, "POST", "/api/v1/templates", t, nil)
		if err != nil {
			return err
		}
		switch st {
		case http.StatusCreated:
		case http.StatusConflict:
			if same, v := c.sameAsLatest(ctx, t); same {
				fmt.Fprintf(out, "unchanged %s version %d (%s)\n", t.Key, v, t.Name)
				continue
			}
			if st, body, err = c.do(ctx, "PUT", "/api/v1/templates/"+t.Key+"/draft", map[string]any{"definition": t.Definition}, nil); err != nil || st != 200 {
				return fmt.Errorf("update draft of %s: %v %d %s", t.Key, err, st, body)
			}
		default:
			return fmt.Errorf("create %s: %d %s", t.Key, st, body)
		}
		var pub struct {
			Version int `json:"version"`
		}
		if st, body, err = c.do(ctx, "POST", "/api/v1/templates/"+t.Key+"/publish", nil, &pub); err != nil || st != 201 {
			return fmt.Errorf("publish %s: %v %d %s", t.Key, err, st, body)
		}
		fmt.Fprintf(out, "published %s version %d (%s)\n", t.Key, pub.Version, t.Name)
	}
	return nil
}

// sameAsLatest reports whether the template's latest published version already holds this definition. Trigger
// secrets are compared as the server shows them ("***" when set): a changed secret alone does not republish.
func (c *apiClient) sameAsLatest(ctx context.Context, t templates.Template) (bool, int) {
	var tv struct {
		LatestVersion *int `json:"latest_version"`
	}
	if st, _, err := c.do(ctx, "GET", "/api/v1/templates/"+t.Key, nil, &tv); err != nil || st != 200 || tv.LatestVersion == nil {
		return false, 0
	}
	var v struct {
		Definition json.RawMessage `json:"definition"`
	}
	if st, _, err := c.do(ctx, "GET", fmt.Sprintf("/api/v1/templates/%s/versions/%d", t.Key, *tv.LatestVersion), nil, &v); err != nil || st != 200 {
		return false, 0
	}
	var a, b bytes.Buffer
	if json.Compact(&a, v.Definition) != nil || json.Compact(&b, template.RedactSecrets(t.Definition)) != nil {
		return false, 0
	}
	var x, y any
	if json.Unmarshal(a.Bytes(), &x) != nil || json.Unmarshal(b.Bytes(), &y) != nil {
		return false, 0
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb), *tv.LatestVersion
}

// upload sends a plugin as multipart/form-data.
func (c *apiClient) upload(ctx context.Context, name, runtime, file string, src []byte) (int, string, error) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	// The form is written to a bytes.Buffer, which does not fail.
	_ = mw.WriteField("name", name)
	_ = mw.WriteField("runtime", runtime)
	fw, err := mw.CreateFormFile("file", file)
	if err != nil {
		return 0, "", err
	}
	_, _ = fw.Write(src)
	_ = mw.Close()
	req, err := http.NewRequestWithContext(ctx, "POST", c.base+"/api/v1/plugins", &b)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	req.Header.Set("Authorization", "Bearer "+c.token)
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	return res.StatusCode, string(body), nil
}

type apiClient struct {
	base, token string
	hc          *http.Client
}

func (c *apiClient) do(ctx context.Context, method, path string, body, into any) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, "", err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	res, err := c.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if into != nil && res.StatusCode < 300 {
		if err := json.Unmarshal(b, into); err != nil {
			return res.StatusCode, string(b), err
		}
	}
	return res.StatusCode, string(b), nil
}
