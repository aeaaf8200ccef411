package postgres

import (
	"crypto/md5"
	"encoding/hex"
	"strconv"
)

// eventChannel is the notification channel of the new events of the
// session whose row id is sid in schema, as function skein_notify_events
// (migration 2) names it.
func eventChannel(schema string, sid int64) string {
	sum := md5.Sum([]byte(schema + "/" + strconv.FormatInt(sid, 10)))
	return "skein_" + hex.EncodeToString(sum[:])
}
