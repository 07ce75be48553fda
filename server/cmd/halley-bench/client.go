package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime/multipart"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-sql-driver/mysql"
)

// client talks to one Halley over HTTP. It is safe for concurrent use.
type client struct {
	base string // http://127.0.0.1:port
	hc   *http.Client
}

// checkLoopback refuses a URL whose host is not a loopback address: the tool drives load and must never be
// pointed at somebody else's server by mistake.
func checkLoopback(raw string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("bad URL %q: %v", raw, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("URL %q: scheme must be http or https", raw)
	}
	host := u.Hostname()
	if host == "localhost" {
		return u, nil
	}
	ip := net.ParseIP(host)
	if ip == nil || !ip.IsLoopback() {
		return nil, fmt.Errorf("URL %q: the benchmark only talks to loopback addresses (127.0.0.1, ::1, localhost)", raw)
	}
	return u, nil
}

func newClient(rawURL string, conns int) (*client, error) {
	u, err := checkLoopback(rawURL)
	if err != nil {
		return nil, err
	}
	tr := &http.Transport{
		Proxy:               nil, // never through a proxy: loopback only
		MaxIdleConns:        conns + 16,
		MaxIdleConnsPerHost: conns + 16,
		IdleConnTimeout:     90 * time.Second,
		DisableCompression:  true,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	}
	return &client{base: strings.TrimRight(u.String(), "/"), hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}, nil
}

func (c *client) close() { c.hc.CloseIdleConnections() }

// apiError is a non-2xx answer.
type apiError struct {
	Status int
	Code   string
	Msg    string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("HTTP %d %s: %s", e.Status, e.Code, e.Msg)
}

// answerError is the *apiError of a non-2xx answer with body b.
func answerError(status int, b []byte) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	msg := e.Error.Message
	if msg == "" {
		msg = strings.TrimSpace(string(b))
		if len(msg) > 200 {
			msg = msg[:200]
		}
	}
	return &apiError{Status: status, Code: e.Error.Code, Msg: msg}
}

// errKind names an error for the error breakdown: the HTTP status, "canceled" or "transport".
func errKind(err error) string {
	var ae *apiError
	var me *mysql.MySQLError
	switch {
	case errors.As(err, &ae):
		return strconv.Itoa(ae.Status)
	case errors.As(err, &me):
		return "mysql_" + strconv.Itoa(int(me.Number))
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return "canceled"
	}
	return "transport"
}

// do sends one request with a JSON body (nil for none) and decodes a 2xx JSON answer into out (nil to drop
// it). A non-2xx answer is an *apiError.
func (c *client) do(ctx context.Context, method, path, token string, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	return c.send(req, token, out)
}

func (c *client) send(req *http.Request, token string, out any) error {
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(resp.StatusCode, b)
	}
	if out == nil || len(b) == 0 {
		return nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s %s: bad JSON answer: %v", req.Method, req.URL.Path, err)
	}
	return nil
}

// login returns a token for the user.
func (c *client) login(ctx context.Context, user, password string) (string, error) {
	var r struct {
		Token string `json:"token"`
	}
	if err := c.do(ctx, http.MethodPost, "/api/v1/auth/login", "", map[string]string{"username": user, "password": password}, &r); err != nil {
		return "", fmt.Errorf("login as %s: %w", user, err)
	}
	if r.Token == "" {
		return "", fmt.Errorf("login as %s: no token in the answer", user)
	}
	return r.Token, nil
}

// publishTemplate creates a template with the definition and publishes version 1.
func (c *client) publishTemplate(ctx context.Context, admin, key string, def any) error {
	body := map[string]any{"key": key, "name": key, "description": "halley-bench", "definition": def}
	if err := c.do(ctx, http.MethodPost, "/api/v1/templates", admin, body, nil); err != nil {
		return fmt.Errorf("create template %s: %w", key, err)
	}
	if err := c.do(ctx, http.MethodPost, "/api/v1/templates/"+url.PathEscape(key)+"/publish", admin, nil, nil); err != nil {
		return fmt.Errorf("publish template %s: %w", key, err)
	}
	return nil
}

// uploadPlugin uploads a plugin file (multipart name/runtime/timeout/file).
func (c *client) uploadPlugin(ctx context.Context, admin, name, runtime, timeout string, file []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for k, v := range map[string]string{"name": name, "runtime": runtime, "timeout": timeout} {
		if err := mw.WriteField(k, v); err != nil {
			return err
		}
	}
	fw, err := mw.CreateFormFile("file", name+".py")
	if err != nil {
		return err
	}
	if _, err := fw.Write(file); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+"/api/v1/plugins", &buf)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", mw.FormDataContentType())
	if err := c.send(req, admin, nil); err != nil {
		return fmt.Errorf("upload plugin %s: %w", name, err)
	}
	return nil
}

// instanceView is the part of an instance answer the suites read.
type instanceView struct {
	ID     string     `json:"id"`
	Status string     `json:"status"`
	Tasks  []taskView `json:"tasks"`
}

type taskView struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Assignee string `json:"assignee"`
}

// pendingTask returns the first pending task of the view assigned to user, or "".
func pendingTask(ts []taskView, user string) string {
	for _, t := range ts {
		if t.Status == "pending" && t.Assignee == user {
			return t.ID
		}
	}
	return ""
}
