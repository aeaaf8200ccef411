package postgres

import (
	"crypto/md5"
	"encoding/hex"
	"strconv"
)

// eventChannel is the notification channel of the new events of the
// session whose row id is sid in schema, as the function
// skein_notify_events of migrations 2 to 8 named it.
func eventChannel(schema string, sid int64) string {
	sum := md5.Sum([]byte(schema + "/" + strconv.FormatInt(sid, 10)))
	return "skein_" + hex.EncodeToString(sum[:])
}
