package postgres

import (
	"errors"
	"net/url"
	"strings"
)

// redacted stands for a password in a redacted DSN.
const redacted = "xxxxx"

// Redact returns dsn with its password, in the URL's user information or
// in a password query parameter, replaced by xxxxx: the form skein prints
// in errors and logs. A DSN that does not parse as a URL (a libpq
// "key=value" string, say) is shown only by its scheme, if any, so that
// nothing of a password can leak.
func Redact(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil || u.Scheme == "" {
		scheme, _, _ := strings.Cut(dsn, "://")
		if scheme == dsn {
			return "(unparsable database URL)"
		}
		return scheme + "://(unparsable database URL)"
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), redacted)
		}
	}
	if q := u.Query(); q.Has("password") {
		q.Set("password", redacted)
		u.RawQuery = q.Encode()
	}
	return u.String()
}

// password returns dsn's password, "" if it has none.
func password(dsn string) string {
	u, err := url.Parse(dsn)
	if err != nil {
		return ""
	}
	if p, ok := u.User.Password(); ok && p != "" {
		return p
	}
	return u.Query().Get("password")
}

// redactErr returns err, or, if its text contains dsn's password (a
// driver error quoting the connection string), an error with the same
// text but the password replaced by xxxxx. The original chain is lost
// only in that case.
func redactErr(err error, dsn string) error {
	p := password(dsn)
	if err == nil || p == "" || !strings.Contains(err.Error(), p) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), p, redacted))
}
