package workspace

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
)

// hostRule is one parsed entry of the network allowlist.
type hostRule struct {
	entry    string     // normalised as written: "api.example.com:443", "*.example.com", "[::1]:8080"
	host     string     // exact host, or the suffix of a wildcard ("example.com" for "*.example.com")
	any      bool       // "*": every host
	wildcard bool       // "*.suffix": every subdomain of suffix
	ip       netip.Addr // valid for an IP entry
	port     string     // "" for every port
	// explicit is set for an exact host or IP entry: only such an entry
	// lets a host reach a non-public address.
	explicit bool
}

// parseHostRule parses an allowlist entry (see Config.AllowNet).
func parseHostRule(entry string) (hostRule, error) {
	bad := func(why string) (hostRule, error) {
		return hostRule{}, fmt.Errorf("invalid network allowlist entry %q: %s", entry, why)
	}
	e := strings.ToLower(entry)
	if e == "" || strings.TrimSpace(e) != e || strings.ContainsAny(e, " \t/?#@") {
		return bad("want host, host:port, *.domain or an IP address")
	}
	host, port := e, ""
	switch {
	case strings.HasPrefix(e, "["):
		if strings.HasSuffix(e, "]") {
			host = e[1 : len(e)-1]
		} else {
			h, p, err := net.SplitHostPort(e)
			if err != nil {
				return bad("malformed [address]:port")
			}
			host, port = h, p
		}
		if _, err := netip.ParseAddr(host); err != nil || strings.Contains(host, "%") {
			return bad("malformed IPv6 address")
		}
	case strings.Count(e, ":") == 1:
		h, p, err := net.SplitHostPort(e)
		if err != nil {
			return bad("malformed host:port")
		}
		host, port = h, p
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != port {
			return bad("invalid port")
		}
	}
	r := hostRule{port: port}
	switch {
	case host == "*":
		r.any = true
	case strings.HasPrefix(host, "*."):
		r.wildcard = true
		r.host = strings.TrimSuffix(host[2:], ".")
		if !validHostname(r.host) {
			return bad("invalid domain after *.")
		}
	default:
		if a, err := netip.ParseAddr(host); err == nil {
			if a.Zone() != "" {
				return bad("zones are not supported")
			}
			r.ip = a.Unmap()
			r.host = r.ip.String()
		} else {
			r.host = strings.TrimSuffix(host, ".")
			if !validHostname(r.host) {
				return bad("invalid host name")
			}
		}
		r.explicit = true
	}
	r.entry = r.render()
	return r, nil
}

// render returns the normalised entry.
func (r hostRule) render() string {
	h := r.host
	switch {
	case r.any:
		h = "*"
	case r.wildcard:
		h = "*." + r.host
	}
	if r.port == "" {
		return h
	}
	if r.ip.Is6() {
		return "[" + h + "]:" + r.port
	}
	return h + ":" + r.port
}

// validHostname reports whether h is a plausible DNS name (letters,
// digits, hyphens and underscores in dot-separated labels).
func validHostname(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for label := range strings.SplitSeq(h, ".") {
		if label == "" || len(label) > 63 {
			return false
		}
		for _, c := range label {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
				return false
			}
		}
	}
	return true
}

// normHost normalises a request host for matching: lower case, no
// trailing dot, no IPv6 brackets, IPv4-mapped addresses unmapped.
func normHost(h string) string {
	h = strings.TrimSuffix(strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")), ".")
	if a, err := netip.ParseAddr(h); err == nil && a.Zone() == "" {
		return a.Unmap().String()
	}
	return h
}

// match reports whether the rule allows host (normalised) on port.
func (r hostRule) match(host, port string) bool {
	if r.port != "" && r.port != port {
		return false
	}
	switch {
	case r.any:
		return true
	case r.wildcard:
		return strings.HasSuffix(host, "."+r.host)
	}
	return host == r.host
}

// covers reports whether everything o allows, r allows too.
func (r hostRule) covers(o hostRule) bool {
	if r.port != "" && r.port != o.port {
		return false
	}
	switch {
	case r.any:
		return true
	case o.any:
		return false
	case r.wildcard:
		if o.ip.IsValid() {
			return false
		}
		return strings.HasSuffix(o.host, "."+r.host) || o.wildcard && o.host == r.host
	case o.wildcard:
		return false
	}
	return r.host == o.host
}

// hostAllowed reports whether some rule allows host on port, and whether
// one that does is explicit.
func (p *Policy) hostAllowed(host, port string) (allowed, explicit bool) {
	for _, r := range p.netRules {
		if r.match(host, port) {
			allowed = true
			explicit = explicit || r.explicit
		}
	}
	return allowed, explicit
}

// addrListed reports whether the address a is listed explicitly for port.
func (p *Policy) addrListed(a netip.Addr, port string) bool {
	a = a.Unmap()
	for _, r := range p.netRules {
		if r.ip.IsValid() && r.ip == a && (r.port == "" || r.port == port) {
			return true
		}
	}
	return false
}

// refuseHost is the refusal of a host that is not on the allowlist.
func (p *Policy) refuseHost(host string) error {
	if len(p.net) == 0 {
		return refusef("net "+host, "--allow-net", "host %q is not allowed (no hosts are allowed; use --allow-net)", host)
	}
	return refusef("net "+host, "--allow-net", "host %q is not allowed (allowed: %s)", host, strings.Join(p.net, ", "))
}

var (
	cgnat    = netip.MustParsePrefix("100.64.0.0/10")
	reserved = []netip.Prefix{
		netip.MustParsePrefix("0.0.0.0/8"),       // "this network"
		netip.MustParsePrefix("192.0.0.0/24"),    // IETF protocol assignments
		netip.MustParsePrefix("198.18.0.0/15"),   // benchmarking
		netip.MustParsePrefix("240.0.0.0/4"),     // reserved, broadcast
		netip.MustParsePrefix("::/96"),           // IPv4-compatible (deprecated)
		netip.MustParsePrefix("100::/64"),        // discard
		netip.MustParsePrefix("64:ff9b:1::/48"),  // local-use NAT64
		netip.MustParsePrefix("fec0::/10"),       // site-local (deprecated)
		netip.MustParsePrefix("2001:db8::/32"),   // documentation
		netip.MustParsePrefix("192.0.2.0/24"),    // documentation
		netip.MustParsePrefix("198.51.100.0/24"), // documentation
		netip.MustParsePrefix("203.0.113.0/24"),  // documentation
	}
	nat64 = netip.MustParsePrefix("64:ff9b::/96")
	six4  = netip.MustParsePrefix("2002::/16")
)

// addrClass returns the kind of a non-public address, with its article
// ("a loopback"), or "" for a public one. An IPv4 address embedded in an
// IPv6 one (mapped, NAT64, 6to4) is judged as itself.
func addrClass(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		b := a.As16()
		switch {
		case nat64.Contains(a):
			return addrClass(netip.AddrFrom4([4]byte(b[12:16])))
		case six4.Contains(a):
			return addrClass(netip.AddrFrom4([4]byte(b[2:6])))
		}
	}
	switch {
	case a.IsUnspecified():
		return "an unspecified"
	case a.IsLoopback():
		return "a loopback"
	case a.IsPrivate():
		return "a private"
	case a.IsLinkLocalUnicast():
		return "a link-local"
	case a.IsMulticast(), a.IsLinkLocalMulticast(), a.IsInterfaceLocalMulticast():
		return "a multicast"
	case cgnat.Contains(a):
		return "a carrier-grade NAT"
	}
	for _, p := range reserved {
		if p.Contains(a) {
			return "a reserved"
		}
	}
	return ""
}

func defaultLookupIP(ctx context.Context, host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
}
