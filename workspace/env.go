package workspace

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
)

// inheritedEnv are the environment variables a command inherits from
// skein's environment. Nothing else is passed unless given in
// RunOptions.Env or RunOptions.SecretEnv.
var inheritedEnv = []string{
	"PATH", "HOME", "USER", "LOGNAME", "SHELL", "TERM", "TZ", "TMPDIR",
	"LANG", "LANGUAGE", "LC_ALL", "LC_CTYPE", "LC_MESSAGES", "LC_COLLATE", "LC_NUMERIC", "LC_TIME",
	// Windows needs these to start most programs.
	"SYSTEMROOT", "SYSTEMDRIVE", "WINDIR", "COMSPEC", "PATHEXT", "TEMP", "TMP", "USERPROFILE",
}

// injectionEnv are the variables a script may never set, whatever
// Config.AllowEnv says: each makes a dynamic loader, a shell, an
// interpreter or a tool load or run code the command line did not name
// (LD_PRELOAD with only "echo" allowed runs any shared object the script
// wrote), or redirects where a command finds its programs and
// configuration. A name ending in "*" is a prefix.
var injectionEnv = []string{
	// dynamic loaders and the C library
	"LD_*", "DYLD_*", "_RLD*", "GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "MALLOC_*",
	"HOSTALIASES", "RESOLV_HOST_CONF",
	// where programs and configuration are found
	"PATH", "HOME", "XDG_CONFIG_HOME", "XDG_CONFIG_DIRS", "XDG_DATA_HOME", "XDG_DATA_DIRS", "TMPDIR", "SHELL",
	// shells
	"BASH_ENV", "ENV", "BASH_FUNC_*", "SHELLOPTS", "BASHOPTS", "PS4", "PROMPT_COMMAND", "IFS", "CDPATH", "ZDOTDIR",
	// interpreters
	"PYTHONSTARTUP", "PYTHONPATH", "PYTHONHOME", "PYTHONINSPECT", "PYTHONUSERBASE", "PYTHONBREAKPOINT",
	"PERL5OPT", "PERL5LIB", "PERLLIB", "PERL5DB", "RUBYOPT", "RUBYLIB",
	"NODE_OPTIONS", "NODE_PATH", "NODE_REPL_EXTERNAL_MODULE",
	"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "CLASSPATH",
	"LUA_INIT*", "LUA_PATH*", "LUA_CPATH*", "TCLLIBPATH", "R_PROFILE*", "PHPRC", "PHP_INI_SCAN_DIR",
	// tools that run a configured program: git, go, make, compilers,
	// editors and pagers, askpass helpers
	"GIT_*", "GOFLAGS", "GOENV", "GOTOOLCHAIN", "GOROOT", "GOPATH", "GOPROXY", "GOBIN", "CGO_*",
	"CC", "CXX", "CPP", "LD", "AR", "MAKEFLAGS", "MFLAGS", "MAKEFILES",
	"EDITOR", "VISUAL", "PAGER", "MANPAGER", "LESSOPEN", "LESSCLOSE", "BROWSER",
	"SSH_ASKPASS", "SUDO_ASKPASS", "SSH_AUTH_SOCK", "GNUPGHOME", "CURL_HOME", "WGETRC", "NETRC",
	"PKG_CONFIG_PATH", "npm_config_*", "NPM_CONFIG_*", "PIP_*", "CARGO_*", "RUSTC_WRAPPER", "RUSTFLAGS",
}

// envPatternMatches reports whether name matches pattern: exactly, or by
// prefix when pattern ends in "*".
func envPatternMatches(pattern, name string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	return pattern == name
}

// neverAllowedEnv reports whether a script may never set name.
func neverAllowedEnv(name string) bool {
	return slices.ContainsFunc(injectionEnv, func(p string) bool { return envPatternMatches(p, name) })
}

// checkEnvAllow checks the entries of Config.AllowEnv.
func checkEnvAllow(entries []string) ([]string, error) {
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		name, _ := strings.CutSuffix(e, "*")
		if e == "" || strings.ContainsAny(name, "=*\x00") || strings.TrimSpace(e) != e || (name == "" && e != "*") {
			return nil, fmt.Errorf("invalid environment allowlist entry %q (want a name, a prefix ending in *, or *)", e)
		}
		if name != "" && neverAllowedEnv(name) {
			return nil, fmt.Errorf("environment allowlist entry %q names variables that can make a command run other code; they are never allowed", e)
		}
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
	}
	return out, nil
}

// allowEnv checks that a script may set the variable name.
func (p *Policy) allowEnv(name string) error {
	if err := checkEnvName(name); err != nil {
		return err
	}
	if neverAllowedEnv(name) {
		return refusef("env "+name, "never allowed", "environment variable %q is never allowed: it can make a command load or run other code", name)
	}
	if slices.ContainsFunc(p.env, func(e string) bool { return envPatternMatches(e, name) }) {
		return nil
	}
	if len(p.env) == 0 {
		return refusef("env "+name, "--allow-env", "environment variable %q is not allowed (no variables are allowed; use --allow-env)", name)
	}
	return refusef("env "+name, "--allow-env", "environment variable %q is not allowed (allowed: %s)", name, strings.Join(p.env, ", "))
}

// commandEnv builds a command's environment, sorted by name: the
// variables inherit names (inheritedEnv when nil) from skein's
// environment, then extra and secrets after checking each against the
// policy.
func (p *Policy) commandEnv(inherit []string, extra map[string]string, secrets map[string]Secret) ([]string, error) {
	if inherit == nil {
		inherit = inheritedEnv
	}
	env := map[string]string{}
	for _, k := range inherit {
		if v, ok := os.LookupEnv(k); ok {
			env[k] = v
		}
	}
	// Check in name order, so the error does not depend on map order;
	// a secret overrides a plain value of the same name.
	values := maps.Clone(extra)
	if values == nil {
		values = map[string]string{}
	}
	for k, s := range secrets {
		values[k] = s.Reveal()
	}
	for _, k := range slices.Sorted(maps.Keys(values)) {
		if err := p.allowEnv(k); err != nil {
			return nil, err
		}
		if strings.ContainsRune(values[k], 0) {
			return nil, fmt.Errorf("environment variable %q: value contains a NUL byte", k)
		}
		env[k] = values[k]
	}
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	slices.Sort(out)
	return out, nil
}

// checkEnvName checks a variable's name; the message never includes a
// value.
func checkEnvName(name string) error {
	if name == "" || strings.ContainsAny(name, "=\x00") {
		return fmt.Errorf("invalid environment variable name %q", name)
	}
	return nil
}

// AllowedEnviron returns the variables of skein's own environment whose
// names the environment allowlist allows, for RunOptions.Env of a
// process that needs them from skein (an external agent's API key:
// --allow-env ANTHROPIC_API_KEY passes it on). Names never allowed are
// left out whatever the allowlist says.
func (p *Policy) AllowedEnviron() map[string]string {
	out := map[string]string{}
	for _, kv := range os.Environ() {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k != "" && p.allowEnv(k) == nil {
			out[k] = v
		}
	}
	return out
}
