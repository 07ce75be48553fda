// Package outbound is the one HTTP client Halley calls other systems with: subscription webhooks, notification
// channels (their SMTP relays through DialContext) and anything else that takes a URL from an admin.
//
// It refuses to connect to loopback, link-local (169.254.0.0/16 — cloud metadata — and fe80::/10), unspecified,
// private (RFC 1918, fc00::/7), shared (CGNAT 100.64.0.0/10) and every other special-purpose range of the IANA
// registries, unless the operator lists the address or host in HALLEY_OUTBOUND_ALLOW. It checks three times:
// when a URL is configured (CheckURL: a literal IP, or what a host name resolves to), when it connects (on the
// address actually dialled, in the dialer's Control function, so a name that resolved to a public address at
// creation and to 127.0.0.1 now — DNS rebinding — is still refused), and on every redirect.
//
// The client never goes through HTTP_PROXY/HTTPS_PROXY: a proxy would connect to addresses the guard never sees.
package outbound

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"regexp"
	"strings"
	"syscall"
	"time"

	"code.dny.dev/ssrf"

	"github.com/halley-bpm/halley/model"
)

// Allow is the operator's exception list (HALLEY_OUTBOUND_ALLOW): address ranges and host names Halley may call
// although they are not public. The zero value allows nothing beyond public addresses.
type Allow struct {
	prefixes []netip.Prefix
	hosts    map[string]struct{}
	suffixes []string // ".corp.example" for "*.corp.example"
	raw      []string
}

var hostPattern = regexp.MustCompile(`^[a-z0-9]([a-z0-9_-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9_-]*[a-z0-9])?)*$`)

// ParseAllow reads a comma-separated list of CIDRs (10.20.0.0/16, fd00:1::/64), single IPs (10.1.2.3) and host
// names (erp.corp.example, or *.corp.example for every name under it). A host name entry trusts whatever that
// name resolves to.
func ParseAllow(s string) (Allow, error) {
	var a Allow
	for _, e := range strings.Split(s, ",") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		switch {
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				return Allow{}, fmt.Errorf("%q is not a CIDR: %v", e, err)
			}
			a.prefixes = append(a.prefixes, p.Masked())
		case isIP(e):
			ip, _ := netip.ParseAddr(e)
			ip = ip.Unmap()
			a.prefixes = append(a.prefixes, netip.PrefixFrom(ip, ip.BitLen()))
		case strings.HasPrefix(e, "*."):
			if !hostPattern.MatchString(e[2:]) {
				return Allow{}, fmt.Errorf("%q is not a host name pattern like *.corp.example", e)
			}
			a.suffixes = append(a.suffixes, e[1:])
		default:
			e = strings.TrimSuffix(e, ".")
			if !hostPattern.MatchString(e) {
				return Allow{}, fmt.Errorf("%q is neither an IP, a CIDR nor a host name", e)
			}
			if a.hosts == nil {
				a.hosts = map[string]struct{}{}
			}
			a.hosts[e] = struct{}{}
		}
		a.raw = append(a.raw, e)
	}
	return a, nil
}

func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}

// String lists the entries as given (normalised to lower case).
func (a Allow) String() string { return strings.Join(a.raw, ",") }

// host reports whether a host name is allowed by name.
func (a Allow) host(h string) bool {
	h = strings.ToLower(strings.TrimSuffix(h, "."))
	if _, ok := a.hosts[h]; ok {
		return true
	}
	for _, s := range a.suffixes {
		if strings.HasSuffix(h, s) {
			return true
		}
	}
	return false
}

func (a Allow) addr(ip netip.Addr) bool {
	for _, p := range a.prefixes {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// BlockedError says that an address may not be called and why.
type BlockedError struct {
	Host  string     // the host name that resolved to Addr; "" when the URL named the address itself
	Addr  netip.Addr // the refused address
	Range string     // "loopback", "link-local", "private", ...
}

func (e *BlockedError) Error() string {
	who := e.Addr.String()
	if e.Host != "" && e.Host != who {
		who = fmt.Sprintf("%s (resolved from %s)", who, e.Host)
	}
	return fmt.Sprintf("address %s is %s: Halley calls only public addresses unless HALLEY_OUTBOUND_ALLOW lists it", who, article(e.Range))
}

func article(r string) string {
	if strings.HasPrefix(r, "a") || strings.HasPrefix(r, "u") {
		return "an " + r + " address"
	}
	return "a " + r + " address"
}

// rangeName names the kind of non-public address ip is, for messages.
func rangeName(ip netip.Addr) string {
	switch {
	case ip.IsUnspecified():
		return "unspecified"
	case ip.IsLoopback():
		return "loopback"
	case ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast():
		return "link-local"
	case ip.IsPrivate():
		return "private"
	case cgnat.Contains(ip):
		return "shared (CGNAT)"
	case ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return "multicast"
	}
	return "reserved"
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

// Resolver resolves host names; *net.Resolver is one. Tests pass their own.
type Resolver interface {
	LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error)
}

// Options configure a Client. Zero values take the defaults in brackets.
type Options struct {
	Allow       Allow
	Resolver    Resolver      // [net.DefaultResolver]
	DialTimeout time.Duration // per connection attempt [10s]
	// CheckTimeout bounds the name resolution of CheckURL [5s].
	CheckTimeout time.Duration
	// Wrap, when set, wraps the guarded transport of every HTTP client (tracing: a span and a traceparent per
	// request). The guard stays underneath it.
	Wrap func(http.RoundTripper) http.RoundTripper
}

// Client holds the guarded transport. It is safe for concurrent use; make one per process and share it.
type Client struct {
	allow     Allow
	resolver  Resolver
	ssrf      *ssrf.Guardian
	guarded   *net.Dialer // checks every address in Control
	trusted   *net.Dialer // for hosts allowed by name
	transport *http.Transport
	rt        http.RoundTripper // transport, wrapped by Options.Wrap
	checkWait time.Duration
}

// New returns a client enforcing opts.Allow.
func New(opts Options) *Client {
	if opts.Resolver == nil {
		opts.Resolver = net.DefaultResolver
	}
	if opts.DialTimeout <= 0 {
		opts.DialTimeout = 10 * time.Second
	}
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 5 * time.Second
	}
	c := &Client{allow: opts.Allow, resolver: opts.Resolver, checkWait: opts.CheckTimeout,
		ssrf: ssrf.New(ssrf.WithAnyPort())}
	c.guarded = &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second, Control: c.control}
	c.trusted = &net.Dialer{Timeout: opts.DialTimeout, KeepAlive: 30 * time.Second}
	c.transport = &http.Transport{
		Proxy:                 nil,
		DialContext:           c.dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          100,
		MaxIdleConnsPerHost:   8,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}
	c.rt = c.transport
	if opts.Wrap != nil {
		c.rt = opts.Wrap(c.transport)
	}
	return c
}

// Allow returns the exception list in force.
func (c *Client) Allow() Allow { return c.allow }

// HTTPClient returns an http.Client over the guarded transport (connections are pooled across all of them).
// redirect, when not nil, adds the caller's own redirect rules; a redirect to a non-public address is refused
// before them, and the dialer refuses it again if a host name leads there.
func (c *Client) HTTPClient(redirect func(req *http.Request, via []*http.Request) error) *http.Client {
	return &http.Client{Transport: c.rt, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		host := req.URL.Hostname()
		if ip, err := netip.ParseAddr(host); err == nil && !c.allow.host(host) {
			if err := c.check("", ip); err != nil {
				return fmt.Errorf("refusing a redirect: %w", err)
			}
		}
		if redirect != nil {
			return redirect(req, via)
		}
		if len(via) >= 10 {
			return errors.New("stopped after 10 redirects")
		}
		return nil
	}}
}

// DialContext connects to addr ("host:port") with the same guard as the HTTP client: every address dialled must
// be public or allowed, else the error wraps a *BlockedError that says so in words. Protocols other than HTTP
// (SMTP relays of notification channels) connect through it.
func (c *Client) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	return c.dial(ctx, network, addr)
}

// CheckAddr returns a *BlockedError unless ip may be called.
func (c *Client) CheckAddr(ip netip.Addr) error { return c.check("", ip) }

func (c *Client) check(host string, ip netip.Addr) error {
	ip = ip.WithZone("").Unmap()
	if c.allow.addr(ip) {
		return nil
	}
	if c.ssrf.SafeAddr(ip) == nil {
		return nil
	}
	return &BlockedError{Host: host, Addr: ip, Range: rangeName(ip)}
}

// control runs on every connection attempt of the guarded dialer with the address being dialled.
func (c *Client) control(network, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return fmt.Errorf("outbound: unexpected address %q: %v", address, err)
	}
	return c.check("", ap.Addr())
}

// dial resolves the host itself (so the resolver is the one configured), drops the addresses the guard refuses
// and dials the others in order; the guarded dialer checks each again in Control.
func (c *Client) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	if _, err := netip.ParseAddr(host); err == nil {
		return c.guarded.DialContext(ctx, network, addr)
	}
	trusted := c.allow.host(host)
	ips, err := c.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, ip := range ips {
		d := c.trusted
		if !trusted {
			if err := c.check(host, ip); err != nil {
				if first == nil {
					first = err
				}
				continue
			}
			d = c.guarded
		}
		conn, err := d.DialContext(ctx, network, net.JoinHostPort(ip.Unmap().String(), port))
		if err == nil {
			return conn, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		first = fmt.Errorf("lookup %s: no addresses", host)
	}
	return nil, first
}

// CheckURL is the check at configuration time: the URL's host must be public (a literal IP, or every address the
// name resolves to now) or allowed. It returns a 422 model error with code address_not_allowed and details
// host, address and range. A name that does not resolve now passes: the connect-time check still applies.
func (c *Client) CheckURL(ctx context.Context, raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return model.CodedError(model.EINVALID, "invalid_url", "%q is not a URL", raw)
	}
	host := u.Hostname()
	if host == "" || c.allow.host(host) {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil {
		return blockedModelError(c.check("", ip))
	}
	ctx, cancel := context.WithTimeout(ctx, c.checkWait)
	defer cancel()
	ips, err := c.resolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil
	}
	for _, ip := range ips {
		if err := c.check(host, ip); err != nil {
			return blockedModelError(err)
		}
	}
	return nil
}

func blockedModelError(err error) error {
	var b *BlockedError
	if !errors.As(err, &b) {
		return err
	}
	return model.CodedError(model.EUNPROCESSABLE, "address_not_allowed", "%s", b.Error()).
		WithDetails(map[string]any{"host": b.Host, "address": b.Addr.String(), "range": b.Range})
}
