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
	// libraries and runtimes that load a configured module, plugin or
	// startup file
	"OPENSSL_CONF", "OPENSSL_ENGINES", "OPENSSL_MODULES", "KRB5_CONFIG", "KRB5_KTNAME", "PKG_CONFIG*",
	"DOTNET_*", "CORECLR_*", "COR_PROFILER*", "COMPlus_*", "MONO_*",
	"EXINIT", "VIMINIT", "GVIMINIT", "MYVIMRC", "VIMRUNTIME", "LESSKEY*", "INPUTRC", "TERMINFO*",
	"GEM_PATH", "GEM_HOME", "BUNDLE_*", "IRBRC", "PYTHONWARNINGS", "PYTHONEXECUTABLE", "PYTHONPYCACHEPREFIX",
	"PERL5SHELL", "PERL_*", "JAVA_HOME", "JDK_HOME", "NODE_EXTRA_CA_CERTS", "ERL_*", "ELIXIR_*", "R_HOME", "R_LIBS*",
	"SSL_CERT_FILE", "SSL_CERT_DIR", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE",
	"HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy",
}

// safeEnv are the variables "*" on the allowlist allows: names known to
// change no program's code, configuration or network path (locale,
// time zone, terminal and colour, log levels, CI markers, credentials by
// their usual names). "*" is not "anything but injectionEnv": programs
// read more variables than any list of dangerous ones names (OPENSSL_CONF
// made an allowlisted curl load a library), so any other variable must
// be named on the allowlist. A name starting with "*" is a suffix.
var safeEnv = []string{
	"LANG", "LANGUAGE", "LC_*", "TZ",
	"TERM", "COLORTERM", "NO_COLOR", "FORCE_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "COLUMNS", "LINES",
	"CI", "DEBUG", "VERBOSE", "LOG_LEVEL", "RUST_LOG", "RUST_BACKTRACE", "NODE_ENV",
	"PYTHONUNBUFFERED", "PYTHONDONTWRITEBYTECODE", "PYTHONIOENCODING", "PYTHONHASHSEED", "PYTHONUTF8",
	"TOKEN", "*_API_KEY", "*_TOKEN",
}

// envPatternMatches reports whether name matches pattern: exactly, by
// prefix when pattern ends in "*", or by suffix when it starts with "*"
// (only in safeEnv). The pattern "*" alone matches the names of safeEnv.
func envPatternMatches(pattern, name string) bool {
	if pattern == "*" {
		return slices.ContainsFunc(safeEnv, func(p string) bool { return envPatternMatches(p, name) })
	}
	if prefix, ok := strings.CutSuffix(pattern, "*"); ok {
		return strings.HasPrefix(name, prefix)
	}
	if suffix, ok := strings.CutPrefix(pattern, "*"); ok {
		return strings.HasSuffix(name, suffix) && len(name) > len(suffix)
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
	if slices.Contains(p.env, "*") {
		return refusef("env "+name, "--allow-env", "environment variable %q is not allowed (allowed: %s; * allows only names known to be safe, such as LANG, TZ, NO_COLOR and *_API_KEY: name it with --allow-env %s)", name, strings.Join(p.env, ", "), name)
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
