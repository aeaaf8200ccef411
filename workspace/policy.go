package workspace

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// ErrNotAllowed is matched, with errors.Is, by every error that refuses an
// operation because of the policy (as opposed to an I/O error).
var ErrNotAllowed = errors.New("not allowed by the workspace policy")

// refusal is an error that refuses an operation because of the policy.
// Its text is only the message; Unwrap makes it match ErrNotAllowed.
type refusal struct{ msg, action, rule string }

func (e *refusal) Error() string { return e.msg }
func (e *refusal) Unwrap() error { return ErrNotAllowed }

// Refusal returns what was refused ("exec rm", "read /etc/passwd",
// "net example.com:443", "env LD_PRELOAD", "write ../x") and the rule
// that refused it ("--allow-cmd", "fs scope sandboxed", ...): an agent
// loop logs them as a security_decision event.
func (e *refusal) Refusal() (action, rule string) { return e.action, e.rule }

// refusef returns the refusal of action by rule, with the message format.
func refusef(action, rule, format string, args ...any) error {
	return &refusal{msg: fmt.Sprintf(format, args...), action: action, rule: rule}
}

// Tier is a file-system scope tier. The tiers are ordered from narrowest
// to widest: Sandboxed < Project < Full. The zero Tier means "unspecified"
// (Sandboxed in a Config, unchanged in a Narrowing).
type Tier int

// The file-system scope tiers.
const (
	// Sandboxed reads and writes only inside the workspace root.
	Sandboxed Tier = iota + 1
	// Project reads anywhere under the git root of the workspace and
	// writes only inside the workspace root.
	Project
	// Full reads and writes anywhere the process can.
	Full
)

// String returns the tier's name as ParseTier accepts it.
func (t Tier) String() string {
	switch t {
	case Sandboxed:
		return "sandboxed"
	case Project:
		return "project"
	case Full:
		return "full"
	case 0:
		return "unspecified"
	}
	return fmt.Sprintf("Tier(%d)", int(t))
}

func (t Tier) valid() bool { return t >= Sandboxed && t <= Full }

// ParseTier parses a tier name: "sandboxed", "project" or "full".
func ParseTier(s string) (Tier, error) {
	switch s {
	case "sandboxed":
		return Sandboxed, nil
	case "project":
		return Project, nil
	case "full":
		return Full, nil
	}
	return 0, fmt.Errorf("invalid fs scope %q (want sandboxed, project or full)", s)
}

// Config is what a run allows, as given on the command line. New checks
// it and builds the Policy.
type Config struct {
	// Root is the workspace directory (--workspace). It must exist.
	Root string
	// Tier is the fs scope (--fs-scope); zero means Sandboxed.
	Tier Tier
	// AllowCmds are the commands Run may execute (--allow-cmd). An entry
	// without a slash is a command name looked up in PATH ("go"); an entry
	// with one allows exactly that path as written ("./scripts/test.sh",
	// "/usr/bin/go"). Empty: no command runs.
	AllowCmds []string
	// AllowNet are the hosts HTTP may reach (--allow-net): "host",
	// "host:port", "*.example.com" (any subdomain, not example.com
	// itself), "*" (any host), IP addresses ("10.0.0.5", "::1",
	// "[::1]:8080"). An entry without a port allows every port. Empty:
	// no egress. Private, loopback and other non-public addresses are
	// reached only through an exact host or IP entry, never a wildcard.
	AllowNet []string
	// AllowEnv are the environment variables a script may set for a
	// command (exec.run's env, --allow-env): names ("GREETING"), prefixes
	// ending in "*" ("MYAPP_*"), or "*" for any name. Empty: none. Names
	// that make a loader, shell, interpreter or tool run code the command
	// line did not name (LD_*, DYLD_*, BASH_ENV, PYTHONSTARTUP,
	// NODE_OPTIONS, GIT_*, PATH, HOME, ...) are refused even under "*",
	// and an entry that names or covers one is an error.
	AllowEnv []string
	// MaxReadBytes bounds a file read whole (fs.read, fs.read_jsonl,
	// fs.read_csv) and a module load() reads (--max-read-bytes); zero
	// means DefaultMaxReadBytes. A bigger file is refused with an error
	// naming the size and the limit.
	MaxReadBytes int64
}

// DefaultMaxReadBytes is the default of Config.MaxReadBytes: 64 MiB (a
// 150 MB file read into a message peaked at 1.6 GB).
const DefaultMaxReadBytes = 64 << 20

// Policy is the workspace policy of one run. It is immutable and safe for
// concurrent use; build it with New and restrict it with Narrow.
type Policy struct {
	root     string // absolute, clean, symbolic links resolved
	tier     Tier
	gitRoot  string // "" when Root is not inside a git work tree
	cmds     []string
	netRules []hostRule
	net      []string // netRules as written, for messages
	env      []string // the environment allowlist
	maxRead  int64    // Config.MaxReadBytes

	// lookupIP resolves a host name; tests replace it.
	lookupIP  func(ctx context.Context, host string) ([]netip.Addr, error)
	transport http.RoundTripper
}

// New checks c and builds its Policy: Root is made absolute, cleaned and
// its symbolic links resolved; for the project tier the git root is found
// by walking up from Root.
func New(c Config) (*Policy, error) {
	if c.Root == "" {
		return nil, errors.New("empty workspace root")
	}
	tier := c.Tier
	if tier == 0 {
		tier = Sandboxed
	}
	if !tier.valid() {
		return nil, fmt.Errorf("invalid fs scope %v", tier)
	}
	root, err := canonicalDir(c.Root)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	cmds, err := checkCmds(c.AllowCmds)
	if err != nil {
		return nil, err
	}
	env, err := checkEnvAllow(c.AllowEnv)
	if err != nil {
		return nil, err
	}
	rules := make([]hostRule, 0, len(c.AllowNet))
	for _, e := range c.AllowNet {
		r, err := parseHostRule(e)
		if err != nil {
			return nil, err
		}
		rules = append(rules, r)
	}
	if c.MaxReadBytes < 0 {
		return nil, fmt.Errorf("the read limit must not be negative, got %d", c.MaxReadBytes)
	}
	p := &Policy{
		root:     root,
		tier:     tier,
		cmds:     cmds,
		env:      env,
		maxRead:  cmp.Or(c.MaxReadBytes, DefaultMaxReadBytes),
		netRules: rules,
		lookupIP: defaultLookupIP,
	}
	if tier == Project {
		p.gitRoot = findGitRoot(root)
	}
	p.finish()
	return p, nil
}

// check refuses to use a Policy that New did not build: the zero Policy
// would otherwise have an empty root, which every path is "inside".
func (p *Policy) check() error {
	if p.root == "" || !p.tier.valid() {
		return errors.New("workspace policy not initialised (use workspace.New)")
	}
	return nil
}

// finish derives the fields that follow from the others.
func (p *Policy) finish() {
	p.net = make([]string, len(p.netRules))
	for i, r := range p.netRules {
		p.net[i] = r.entry
	}
	p.transport = p.newTransport()
}

// canonicalDir returns dir absolute, clean and with its symbolic links
// resolved, after checking that it is a directory.
func canonicalDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", err
	}
	fi, err := os.Stat(real)
	if err != nil {
		return "", err
	}
	if !fi.IsDir() {
		return "", fmt.Errorf("%s is not a directory", dir)
	}
	return real, nil
}

// findGitRoot returns the nearest ancestor of dir (dir included) that
// holds a .git directory or file, or "".
func findGitRoot(dir string) string {
	for {
		if _, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

func checkCmds(cmds []string) ([]string, error) {
	out := make([]string, 0, len(cmds))
	for _, c := range cmds {
		if c == "" || strings.TrimSpace(c) != c || strings.ContainsRune(c, 0) {
			return nil, fmt.Errorf("invalid command allowlist entry %q", c)
		}
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out, nil
}

// Root returns the workspace root: absolute, clean, symbolic links
// resolved. Relative paths are relative to it and commands run in it.
func (p *Policy) Root() string { return p.root }

// MaxReadBytes returns the most bytes a file read whole may have.
func (p *Policy) MaxReadBytes() int64 { return p.maxRead }

// Tier returns the fs scope tier.
func (p *Policy) Tier() Tier { return p.tier }

// GitRoot returns the git root found for the project tier, or "" (for the
// other tiers, or when Root is not inside a git work tree).
func (p *Policy) GitRoot() string { return p.gitRoot }

// ReadRoot returns the directory reads are confined to: Root (sandboxed),
// the git root or Root when there is none (project), "/" (full).
func (p *Policy) ReadRoot() string { return p.scopeDir(accessRead) }

// WriteRoot returns the directory writes are confined to: Root, or "/"
// for the full tier.
func (p *Policy) WriteRoot() string { return p.scopeDir(accessWrite) }

// AllowCmds returns a copy of the command allowlist.
func (p *Policy) AllowCmds() []string { return slices.Clone(p.cmds) }

// AllowEnv returns a copy of the environment allowlist.
func (p *Policy) AllowEnv() []string { return slices.Clone(p.env) }

// AllowNet returns a copy of the network allowlist, normalised (lower
// case, no trailing dot).
func (p *Policy) AllowNet() []string { return slices.Clone(p.net) }

// String summarises the policy in one line, for logs and snapshots.
func (p *Policy) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "fs scope %s: %s", p.tier, p.root)
	if p.tier == Project {
		if p.gitRoot != "" {
			fmt.Fprintf(&b, " (reads under %s)", p.gitRoot)
		} else {
			b.WriteString(" (no git root)")
		}
	}
	fmt.Fprintf(&b, "; commands: %s; net: %s", listOrNone(p.cmds), listOrNone(p.net))
	if len(p.env) > 0 {
		fmt.Fprintf(&b, "; env: %s", strings.Join(p.env, ", "))
	}
	return b.String()
}

func listOrNone(items []string) string {
	if len(items) == 0 {
		return "none"
	}
	return strings.Join(items, ", ")
}

// Narrowing describes how Narrow restricts a policy. Zero fields keep the
// current value, so a Starlark builtin can fill it from its optional
// keyword arguments: root=None leaves Root "", fs_scope=None leaves Tier
// 0, allow_cmd=None leaves AllowCmds nil. Note that an absent list and an
// empty one differ: a nil pointer keeps the current list, a pointer to an
// empty slice allows nothing.
type Narrowing struct {
	// Root, if set, is the new workspace root. A relative path is
	// relative to the current Root; it must resolve to a directory inside
	// the current Root.
	Root string
	// Tier, if set, is the new fs scope; it must not be wider.
	Tier Tier
	// AllowCmds, if set, is the new command allowlist; every entry must
	// be on the current one.
	AllowCmds *[]string
	// AllowNet, if set, is the new network allowlist; every entry must be
	// covered by the current one ("api.example.com" and
	// "*.api.example.com" are covered by "*.example.com", "host:443" by
	// "host"). An exact host reaches private addresses only if the
	// current list names that host exactly too.
	AllowNet *[]string
}

// Narrow returns a copy of p restricted by n. The copy is never wider
// than p: any field of n that would widen it is refused with an error
// naming what would widen, and p is never modified.
func (p *Policy) Narrow(n Narrowing) (*Policy, error) {
	q := &Policy{
		root:     p.root,
		tier:     p.tier,
		gitRoot:  p.gitRoot,
		cmds:     p.cmds,
		env:      p.env,
		maxRead:  p.maxRead,
		netRules: p.netRules,
		lookupIP: p.lookupIP,
	}
	if n.Tier != 0 {
		if !n.Tier.valid() {
			return nil, fmt.Errorf("invalid fs scope %v", n.Tier)
		}
		if n.Tier > p.tier {
			return nil, fmt.Errorf("cannot widen fs scope from %s to %s", p.tier, n.Tier)
		}
		q.tier = n.Tier
	}
	if n.Root != "" {
		dir := n.Root
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(p.root, dir)
		}
		root, err := canonicalDir(dir)
		if err != nil {
			return nil, fmt.Errorf("workspace root: %w", err)
		}
		if !within(root, p.root) {
			return nil, fmt.Errorf("cannot widen the workspace root: %q is outside %s", n.Root, p.root)
		}
		q.root = root
	}
	q.gitRoot = ""
	if q.tier == Project {
		q.gitRoot = findGitRoot(q.root)
		// Never wider than p's read scope, whatever the disk says now.
		if !within(q.ReadRoot(), p.ReadRoot()) {
			return nil, fmt.Errorf("cannot widen the project read scope from %s to %s", p.ReadRoot(), q.ReadRoot())
		}
	}
	if n.AllowCmds != nil {
		cmds, err := checkCmds(*n.AllowCmds)
		if err != nil {
			return nil, err
		}
		for _, c := range cmds {
			if !slices.Contains(p.cmds, c) {
				return nil, fmt.Errorf("cannot widen the command allowlist: %q is not on it (allowed: %s)", c, listOrNone(p.cmds))
			}
		}
		q.cmds = cmds
	}
	if n.AllowNet != nil {
		rules := make([]hostRule, 0, len(*n.AllowNet))
		for _, e := range *n.AllowNet {
			r, err := parseHostRule(e)
			if err != nil {
				return nil, err
			}
			covered := false
			for _, c := range p.netRules {
				if c.covers(r) {
					covered = true
					break
				}
			}
			if !covered {
				return nil, fmt.Errorf("cannot widen the network allowlist: %q is not covered by it (allowed: %s)", e, listOrNone(p.net))
			}
			// An exact entry keeps its private-address exemption only if
			// an exact entry of p grants it.
			r.explicit = r.explicit && slices.ContainsFunc(p.netRules, func(c hostRule) bool {
				return c.explicit && c.covers(r)
			})
			rules = append(rules, r)
		}
		q.netRules = rules
	}
	q.finish()
	return q, nil
}

// WithRoot returns a copy of p whose workspace root is dir (which must
// be an existing directory; it is made absolute, cleaned and its
// symbolic links resolved), with p's tier and allowlists. Unlike Narrow,
// dir need not be inside p's root: the caller vouches for it (skein
// serve gives a session bound to a repository the repository as its
// root, after checking that it lies inside the workspace root).
func (p *Policy) WithRoot(dir string) (*Policy, error) {
	if err := p.check(); err != nil {
		return nil, err
	}
	root, err := canonicalDir(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace root: %w", err)
	}
	q := &Policy{root: root, tier: p.tier, cmds: p.cmds, env: p.env, maxRead: p.maxRead, netRules: p.netRules, lookupIP: p.lookupIP}
	if q.tier == Project {
		q.gitRoot = findGitRoot(root)
	}
	q.finish()
	return q, nil
}

// policyKey is the context key of NewContext.
type policyKey struct{}

// NewContext returns ctx carrying p: the workspace a request's work is
// held to (skein serve passes a session's workspace to its agent this
// way).
func NewContext(ctx context.Context, p *Policy) context.Context {
	return context.WithValue(ctx, policyKey{}, p)
}

// FromContext returns the policy NewContext put in ctx, or nil.
func FromContext(ctx context.Context) *Policy {
	p, _ := ctx.Value(policyKey{}).(*Policy)
	return p
}
