package notify

import (
	"bytes"
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/mail"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"

	gomail "github.com/emersion/go-message/mail"
	"github.com/emersion/go-sasl"
	"github.com/emersion/go-smtp"

	"github.com/halley-bpm/halley/model"
	"github.com/halley-bpm/halley/service/outbound"
)

// Message is one rendered message to one person, as a delivery keeps it: the same on every attempt.
type Message struct {
	Event      string    `json:"event"`
	At         time.Time `json:"at"`
	Lang       string    `json:"lang"`
	Subject    string    `json:"subject"`
	Text       string    `json:"text"`
	Link       string    `json:"link"`
	InstanceID string    `json:"instance_id,omitempty"`
	TaskID     string    `json:"task_id,omitempty"`
	Title      string    `json:"title,omitempty"`
	Step       string    `json:"step,omitempty"`
	To         Recipient `json:"to"`
}

// Recipient is who a message is for, with the addresses the channels use.
type Recipient struct {
	Username    string `json:"username"`
	DisplayName string `json:"display_name"`
	Email       string `json:"email,omitempty"`
	Mobile      string `json:"mobile,omitempty"`
	IMID        string `json:"im_id,omitempty"`
	Language    string `json:"language"`
}

// Sender is a channel: it hands one message over, or says why it could not. An error's text goes into the
// delivery log and the test endpoint's answer, so it never contains a secret (URLs are shown by host only).
type Sender interface {
	Send(ctx context.Context, m *Message) error
}

// channelConfig is a channel's whole configuration, as sealed in the store. Each kind uses its own fields.
type channelConfig struct {
	Host          string `json:"host,omitempty"`
	Port          int    `json:"port,omitempty"`
	Username      string `json:"username,omitempty"`
	Password      string `json:"password,omitempty"`
	From          string `json:"from,omitempty"`
	TLS           string `json:"tls,omitempty"`
	WebhookURL    string `json:"webhook_url,omitempty"`
	URL           string `json:"url,omitempty"`
	Secret        string `json:"secret,omitempty"`
	RatePerMinute *int   `json:"rate_per_minute,omitempty"`
}

// The fields each kind accepts (anything else is a 400), and its rate when the admin gives none: DingTalk and
// WeCom robots take 20 messages a minute, Feishu's custom bots 100 (and 5 a second).
var (
	kindFields = map[string][]string{
		model.ChannelSMTP:     {"host", "port", "username", "password", "from", "tls", "rate_per_minute"},
		model.ChannelDingTalk: {"webhook_url", "secret", "rate_per_minute"},
		model.ChannelFeishu:   {"webhook_url", "secret", "rate_per_minute"},
		model.ChannelWeCom:    {"webhook_url", "rate_per_minute"},
		model.ChannelWebhook:  {"url", "secret", "rate_per_minute"},
	}
	defaultRate = map[string]int{model.ChannelDingTalk: 20, model.ChannelWeCom: 20, model.ChannelFeishu: 100}
)

const (
	maxRate      = 6000
	maxSecretLen = 512
	maxURLLen    = 2048
)

var (
	channelNameRe = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)
	hostRe        = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)
)

// rate is the channel's limit per minute (0 = none).
func (c *channelConfig) rate(kind string) int {
	if c.RatePerMinute != nil {
		return *c.RatePerMinute
	}
	return defaultRate[kind]
}

// parseConfig reads and checks the config of a new channel of kind. Codes: invalid_config (400) for unknown or
// malformed fields; insecure_auth (422) for an SMTP password that would travel in clear text.
func parseConfig(kind string, raw json.RawMessage) (*channelConfig, error) {
	fields, ok := kindFields[kind]
	if !ok {
		return nil, model.CodedError(model.EINVALID, "invalid_kind", "kind must be one of %s (got %q)", strings.Join(model.ChannelKinds, ", "), kind)
	}
	bad := func(format string, args ...any) error {
		return model.CodedError(model.EINVALID, "invalid_config", "config: "+format, args...).WithDetails(map[string]any{"fields": fields})
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return nil, bad("must be an object with %s", strings.Join(fields, ", "))
	}
	for k := range m {
		if !contains(fields, k) {
			return nil, bad("%q is not a field of a %s channel", k, kind)
		}
	}
	var c channelConfig
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, bad("%v", err)
	}
	if c.RatePerMinute != nil && (*c.RatePerMinute < 0 || *c.RatePerMinute > maxRate) {
		return nil, bad("rate_per_minute must be between 0 (no limit) and %d", maxRate)
	}
	if len(c.Secret) > maxSecretLen || len(c.Password) > maxSecretLen {
		return nil, bad("secrets and passwords are at most %d bytes", maxSecretLen)
	}
	switch kind {
	case model.ChannelSMTP:
		c.Host = strings.TrimSpace(c.Host)
		if !hostRe.MatchString(c.Host) {
			return nil, bad("host must be a host name or an IP address")
		}
		if c.TLS == "" {
			c.TLS = "starttls"
		}
		if c.TLS != "starttls" && c.TLS != "tls" && c.TLS != "none" {
			return nil, bad("tls must be starttls (the default), tls or none")
		}
		if c.Port == 0 {
			c.Port = map[string]int{"starttls": 587, "tls": 465, "none": 25}[c.TLS]
		}
		if c.Port < 1 || c.Port > 65535 {
			return nil, bad("port must be between 1 and 65535")
		}
		from, err := mail.ParseAddress(c.From)
		if err != nil || strings.ContainsAny(c.From, "\r\n") {
			return nil, bad("from must be an address like \"Halley <halley@example.com>\"")
		}
		c.From = from.String()
		if (c.Username == "") != (c.Password == "") {
			return nil, bad("give both username and password, or neither")
		}
		if c.Username != "" && c.TLS == "none" {
			return nil, model.CodedError(model.EUNPROCESSABLE, "insecure_auth", "a password is never sent in clear text: use tls starttls or tls with username and password")
		}
	case model.ChannelWebhook:
		if err := checkURL("url", c.URL); err != nil {
			return nil, err
		}
	default:
		if err := checkURL("webhook_url", c.WebhookURL); err != nil {
			return nil, err
		}
	}
	return &c, nil
}

func checkURL(field, raw string) error {
	bad := func(why string) error {
		return model.CodedError(model.EINVALID, "invalid_config", "config: %s %s", field, why)
	}
	if len(raw) > maxURLLen {
		return bad("must be at most 2048 characters")
	}
	u, err := url.Parse(raw)
	if err != nil || raw == "" {
		return bad("must be the URL the robot's settings show")
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return bad("must start with https://")
	}
	if u.Opaque != "" || u.Hostname() == "" {
		return bad("must name a host")
	}
	return nil
}

// target is the address a channel connects to, for the outbound guard at creation.
func (c *channelConfig) target(kind string) string {
	switch kind {
	case model.ChannelSMTP:
		return "smtp://" + net.JoinHostPort(c.Host, strconv.Itoa(c.Port))
	case model.ChannelWebhook:
		return c.URL
	}
	return c.WebhookURL
}

// public is what answers and the audit log show of a config: secrets as "***", URLs (whose path or query is
// the robot's access token) by scheme and host only.
func (c *channelConfig) public(kind string) map[string]any {
	out := map[string]any{"rate_per_minute": c.rate(kind)}
	switch kind {
	case model.ChannelSMTP:
		out["host"], out["port"], out["from"], out["tls"], out["username"] = c.Host, c.Port, c.From, c.TLS, c.Username
		out["password"] = model.MaskSecret(c.Password)
	case model.ChannelWebhook:
		out["url"], out["secret"] = maskURL(c.URL), model.MaskSecret(c.Secret)
	case model.ChannelWeCom:
		out["webhook_url"] = maskURL(c.WebhookURL)
	default:
		out["webhook_url"], out["secret"] = maskURL(c.WebhookURL), model.MaskSecret(c.Secret)
	}
	return out
}

// maskURL keeps the scheme and host of a URL: "https://oapi.dingtalk.com/***".
func maskURL(raw string) string {
	return hostOf(raw) + "/" + model.Masked
}

func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(no host)"
	}
	return u.Scheme + "://" + u.Host
}

// sealer seals channel configs at rest (AES-256-GCM; the channel's tenant and name are the additional data, so a
// sealed config copied to another channel does not open).
type sealer struct{ aead cipher.AEAD }

const sealedPrefix = "sealed:v1:"

func newSealer(key []byte) sealer {
	k := sha256.Sum256(append([]byte("halley:notification-channel:"), key...))
	block, _ := aes.NewCipher(k[:]) // a 32-byte key cannot fail
	aead, _ := cipher.NewGCM(block)
	return sealer{aead: aead}
}

func (s sealer) seal(tenant, name string, c *channelConfig) (string, error) {
	plain, err := json.Marshal(c) //nolint:gosec // G117: marshalled only to be sealed (AES-GCM) below; the plain text is never stored, sent or logged
	if err != nil {
		return "", err
	}
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", fmt.Errorf("notify: unable to seal a channel config: %w", err)
	}
	out := s.aead.Seal(nonce, nonce, plain, []byte(tenant+"/"+name))
	return sealedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

func (s sealer) open(tenant, name, sealed string) (*channelConfig, error) {
	b64, ok := strings.CutPrefix(sealed, sealedPrefix)
	if !ok {
		return nil, errors.New("the channel's config is not sealed")
	}
	b, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(b) < s.aead.NonceSize() {
		return nil, errors.New("the channel's sealed config is damaged")
	}
	plain, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(tenant+"/"+name))
	if err != nil {
		return nil, errors.New("the channel's config does not open with this HALLEY_SECRET (was it changed, or do replicas differ?)")
	}
	var c channelConfig
	if err := json.Unmarshal(plain, &c); err != nil {
		return nil, errors.New("the channel's sealed config is damaged")
	}
	return &c, nil
}

// transport is what the senders share: the guarded HTTP client and dialer, the clock, limits.
type transport struct {
	out       *outbound.Client
	http      *http.Client
	now       func() time.Time
	timeout   time.Duration
	tlsConfig *tls.Config
	userAgent string
}

// newSender builds the sender of a channel.
func (t *transport) newSender(kind, name string, c *channelConfig) (Sender, error) {
	switch kind {
	case model.ChannelSMTP:
		return &smtpSender{t: t, c: c}, nil
	case model.ChannelDingTalk:
		return &dingTalk{t: t, c: c}, nil
	case model.ChannelFeishu:
		return &feishu{t: t, c: c}, nil
	case model.ChannelWeCom:
		return &weCom{t: t, c: c}, nil
	case model.ChannelWebhook:
		return &webhook{t: t, c: c, channel: name}, nil
	}
	return nil, fmt.Errorf("unknown channel kind %q", kind)
}

// maxAnswer is how much of a receiver's answer is read.
const maxAnswer = 64 << 10

// post sends a JSON body and returns the answer's body; any status but 2xx is an error naming the host.
func (t *transport) post(ctx context.Context, rawURL string, body []byte, header http.Header) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, t.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, rawURL, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("unable to build the request to %s", hostOf(rawURL))
	}
	for k, v := range header {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", t.userAgent)
	resp, err := t.http.Do(req)
	if err != nil {
		if ctx.Err() == context.DeadlineExceeded {
			return nil, fmt.Errorf("POST %s: no answer within %s", hostOf(rawURL), t.timeout)
		}
		return nil, errors.New(redact(err))
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("POST %s: HTTP %d %s", hostOf(rawURL), resp.StatusCode, printable(answer, 256))
	}
	if err != nil {
		return nil, fmt.Errorf("POST %s: reading the answer: %s", hostOf(rawURL), redact(err))
	}
	return answer, nil
}

// redact describes a client error naming the host only: a robot's URL is its credential.
func redact(err error) string {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Sprintf("%s %s: %v", ue.Op, hostOf(ue.URL), ue.Err)
	}
	return err.Error()
}

// printable returns at most n bytes of b as one line of printable text.
func printable(b []byte, n int) string {
	s := strings.Map(func(r rune) rune {
		if unicode.IsPrint(r) {
			return r
		}
		return ' '
	}, strings.ToValidUTF8(string(b), "?"))
	return truncateBytes(strings.Join(strings.Fields(s), " "), n)
}

// imAnswer is the answer of DingTalk and WeCom robots ({"errcode":0,"errmsg":"ok"}) and of Feishu bots
// ({"code":0,"msg":"success"}; older ones {"StatusCode":0}).
type imAnswer struct {
	ErrCode    *int   `json:"errcode"`
	ErrMsg     string `json:"errmsg"`
	Code       *int   `json:"code"`
	Msg        string `json:"msg"`
	StatusCode *int   `json:"StatusCode"`
}

// checkIM turns a robot's 200 answer into an error when it reports one.
func checkIM(vendor string, answer []byte) error {
	var a imAnswer
	if err := json.Unmarshal(answer, &a); err != nil {
		return fmt.Errorf("%s answered something that is not its JSON: %s", vendor, printable(answer, 256))
	}
	for _, c := range []struct {
		code *int
		msg  string
	}{{a.ErrCode, a.ErrMsg}, {a.Code, a.Msg}, {a.StatusCode, a.Msg}} {
		if c.code != nil && *c.code != 0 {
			return fmt.Errorf("%s refused the message: code %d: %s", vendor, *c.code, printable([]byte(c.msg), 256))
		}
	}
	if a.ErrCode == nil && a.Code == nil && a.StatusCode == nil {
		return fmt.Errorf("%s answered without a result code: %s", vendor, printable(answer, 256))
	}
	return nil
}

// imText is a message as IM robots show it: the subject, the body (which ends with the link).
func imText(m *Message) string {
	return m.Subject + "\n" + m.Text
}

// DingTalkSign is the sign of a DingTalk custom robot's request: base64(HMAC-SHA256(key = secret, message =
// timestamp + "\n" + secret)), before URL encoding. timestamp is in milliseconds.
func DingTalkSign(timestamp, secret string) string {
	m := hmac.New(sha256.New, []byte(secret))
	m.Write([]byte(timestamp + "\n" + secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// dingTalk posts to a DingTalk custom robot (a group's webhook): a markdown message that @-mentions the
// recipient by mobile number or user id when the user has them. With a secret the request is signed: timestamp
// (ms) and sign in the query.
type dingTalk struct {
	t *transport
	c *channelConfig
}

func (d *dingTalk) Send(ctx context.Context, m *Message) error {
	u, err := url.Parse(d.c.WebhookURL)
	if err != nil {
		return errors.New("the webhook URL does not parse")
	}
	if d.c.Secret != "" {
		ts := strconv.FormatInt(d.t.now().UnixMilli(), 10)
		q := u.Query()
		q.Set("timestamp", ts)
		q.Set("sign", DingTalkSign(ts, d.c.Secret))
		u.RawQuery = q.Encode()
	}
	text := "#### " + m.Subject + "\n\n" + strings.ReplaceAll(m.Text, "\n", "\n\n")
	at := map[string]any{"isAtAll": false}
	if m.To.Mobile != "" {
		at["atMobiles"] = []string{m.To.Mobile}
		text += "\n\n@" + m.To.Mobile
	}
	if m.To.IMID != "" {
		at["atUserIds"] = []string{m.To.IMID}
		text += "\n\n@" + m.To.IMID
	}
	body, _ := json.Marshal(map[string]any{"msgtype": "markdown", "markdown": map[string]string{"title": m.Subject, "text": truncateBytes(text, 4000)}, "at": at})
	answer, err := d.t.post(ctx, u.String(), body, nil)
	if err != nil {
		return err
	}
	return checkIM("DingTalk", answer)
}

// FeishuSign is the sign of a Feishu custom bot's request: base64(HMAC-SHA256(key = timestamp + "\n" + secret,
// message = empty)). timestamp is in seconds.
func FeishuSign(timestamp, secret string) string {
	m := hmac.New(sha256.New, []byte(timestamp+"\n"+secret))
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// feishu posts to a Feishu custom bot: a text message that @-mentions the recipient by their open id (im_id).
// With a secret, timestamp (s) and sign are in the body.
type feishu struct {
	t *transport
	c *channelConfig
}

func (f *feishu) Send(ctx context.Context, m *Message) error {
	text := imText(m)
	if m.To.IMID != "" {
		text = fmt.Sprintf("<at user_id=\"%s\">%s</at> %s", escapeAttr(m.To.IMID), escapeAttr(m.To.DisplayName), text)
	}
	req := map[string]any{"msg_type": "text", "content": map[string]string{"text": truncateBytes(text, 4000)}}
	if f.c.Secret != "" {
		ts := strconv.FormatInt(f.t.now().Unix(), 10)
		req["timestamp"], req["sign"] = ts, FeishuSign(ts, f.c.Secret)
	}
	body, _ := json.Marshal(req)
	answer, err := f.t.post(ctx, f.c.WebhookURL, body, nil)
	if err != nil {
		return err
	}
	return checkIM("Feishu", answer)
}

func escapeAttr(s string) string {
	return strings.NewReplacer(`"`, "", "<", "", ">", "").Replace(s)
}

// weCom posts to a WeCom (企业微信) group robot: a text message (at most 2048 bytes) that @-mentions the recipient
// by user id (im_id) or mobile number.
type weCom struct {
	t *transport
	c *channelConfig
}

func (w *weCom) Send(ctx context.Context, m *Message) error {
	text := map[string]any{"content": truncateBytes(imText(m), 2048)}
	if m.To.IMID != "" {
		text["mentioned_list"] = []string{m.To.IMID}
	}
	if m.To.Mobile != "" {
		text["mentioned_mobile_list"] = []string{m.To.Mobile}
	}
	body, _ := json.Marshal(map[string]any{"msgtype": "text", "text": text})
	answer, err := w.t.post(ctx, w.c.WebhookURL, body, nil)
	if err != nil {
		return err
	}
	return checkIM("WeCom", answer)
}

// Headers of a generic webhook's request; the signature is the subscriptions' (sha256=<hex HMAC of the body>).
const (
	HeaderEvent     = "X-Halley-Event"
	HeaderSignature = "X-Halley-Signature"
	HeaderChannel   = "X-Halley-Channel"
)

// webhook posts the message as JSON to any URL, signed like subscription webhooks when it has a secret.
type webhook struct {
	t       *transport
	c       *channelConfig
	channel string
}

func (w *webhook) Send(ctx context.Context, m *Message) error {
	body, _ := json.Marshal(m)
	h := http.Header{}
	h.Set(HeaderEvent, m.Event)
	h.Set(HeaderChannel, w.channel)
	if w.c.Secret != "" {
		h.Set(HeaderSignature, Sign([]byte(w.c.Secret), body))
	}
	_, err := w.t.post(ctx, w.c.URL, body, h)
	return err
}

// Sign returns the X-Halley-Signature of body: "sha256=" and the hex HMAC-SHA256 of body with secret.
func Sign(secret, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// smtpSender sends mail through an SMTP relay: STARTTLS (587), implicit TLS (465) or plain (25, without
// authentication), AUTH PLAIN when it has a username. It connects through the outbound guard: a relay on a
// private address is reached only when HALLEY_OUTBOUND_ALLOW names it.
type smtpSender struct {
	t *transport
	c *channelConfig
}

func (s *smtpSender) Send(ctx context.Context, m *Message) error {
	if m.To.Email == "" {
		return errors.New("the recipient has no email address")
	}
	msg, err := s.compose(m)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, s.t.timeout)
	defer cancel()
	addr := net.JoinHostPort(s.c.Host, strconv.Itoa(s.c.Port))
	conn, err := s.t.out.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("SMTP %s: %w", addr, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl) // a connection that cannot take a deadline fails its first read instead
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	tlsConfig := s.t.tlsConfig.Clone()
	tlsConfig.ServerName = s.c.Host
	var c *smtp.Client
	switch s.c.TLS {
	case "tls":
		c = smtp.NewClient(tls.Client(conn, tlsConfig))
	case "starttls":
		c, err = smtp.NewClientStartTLS(conn, tlsConfig)
	default:
		c = smtp.NewClient(conn)
	}
	if err != nil {
		_ = conn.Close()
		return fmt.Errorf("SMTP %s: %v", addr, err)
	}
	defer c.Close() //nolint:errcheck // after QUIT, or on an error already reported
	if s.c.Username != "" {
		if err := c.Auth(sasl.NewPlainClient("", s.c.Username, s.c.Password)); err != nil {
			return fmt.Errorf("SMTP %s: authentication failed: %v", addr, err)
		}
	}
	from, _ := mail.ParseAddress(s.c.From) // checked at creation
	if err := c.SendMail(from.Address, []string{m.To.Email}, bytes.NewReader(msg)); err != nil {
		return fmt.Errorf("SMTP %s: %v", addr, err)
	}
	if err := c.Quit(); err != nil {
		return fmt.Errorf("SMTP %s: the message was accepted but QUIT failed: %v", addr, err)
	}
	return nil
}

// compose writes the mail: a plain-text UTF-8 body, quoted-printable, with an RFC 2047 encoded subject.
func (s *smtpSender) compose(m *Message) ([]byte, error) {
	from, _ := mail.ParseAddress(s.c.From)
	var h gomail.Header
	h.SetDate(m.At)
	h.SetAddressList("From", []*gomail.Address{{Name: from.Name, Address: from.Address}})
	h.SetAddressList("To", []*gomail.Address{{Name: m.To.DisplayName, Address: m.To.Email}})
	h.SetSubject(m.Subject)
	h.Set("Content-Language", m.Lang)
	if err := h.GenerateMessageIDWithHostname(strings.TrimSpace(from.Address[strings.LastIndex(from.Address, "@")+1:])); err != nil {
		return nil, fmt.Errorf("unable to make a Message-ID: %w", err)
	}
	h.SetContentType("text/plain", map[string]string{"charset": "utf-8"})
	h.Set("Content-Transfer-Encoding", "quoted-printable")
	var buf bytes.Buffer
	w, err := gomail.CreateSingleInlineWriter(&buf, h)
	if err != nil {
		return nil, fmt.Errorf("unable to write the mail: %w", err)
	}
	if _, err := io.WriteString(w, m.Text+"\n"); err != nil {
		return nil, fmt.Errorf("unable to write the mail: %w", err)
	}
	if err := w.Close(); err != nil {
		return nil, fmt.Errorf("unable to write the mail: %w", err)
	}
	return buf.Bytes(), nil
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}
