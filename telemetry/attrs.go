package telemetry

import (
	"encoding/binary"

	"go.opentelemetry.io/otel/attribute"
)

// A recording span's attributes are kept encoded: each is appended, as
// it is set, to the record's attrSet as the OTLP Span's attributes field
// (9), a common/v1 KeyValue message, so that the span's end copies them
// into its batch instead of encoding them, and a record holds bytes
// rather than attribute values (which the garbage collector would scan,
// and whose copies need write barriers while it marks). The span limits
// apply as the SDK applies them: an attribute set again replaces the
// earlier value, a new key past the count limit is dropped and counted,
// string values are cut to the length limit.

// attrField is the tag byte of a Span's attributes field (9, bytes).
const attrField = 9<<3 | wireBytes

// attrSet is a span's encoded attributes.
type attrSet struct {
	buf     []byte    // the attributes fields, one after the other
	at      []attrPos // where each is in buf
	dropped int       // attributes dropped (invalid, or past the count limit)
	// bit len(key)%64 is set for each key in at: a key whose bit is not
	// set is not there (add looks no further; a span's keys mostly differ
	// in length)
	lengths uint64
}

// attrPos is where an attributes field is in its attrSet's buf: it
// starts at off, its key is buf[key:key+keyLen].
type attrPos struct{ off, key, keyLen uint32 }

// add prepares for a field of key: it removes the field key had, or
// reports false (counting it dropped) when key is new and limit fields
// are there already (a negative limit is none). The caller then appends
// the field with put.
func (a *attrSet) add(key string, limit int) bool {
	if a.lengths&(1<<(len(key)%64)) != 0 {
		for i, p := range a.at {
			if int(p.keyLen) == len(key) && string(a.buf[p.key:p.key+p.keyLen]) == key {
				a.remove(i)
				return true
			}
		}
	}
	if limit >= 0 && len(a.at) >= limit {
		a.dropped++
		return false
	}
	return true
}

// remove removes the i-th field.
func (a *attrSet) remove(i int) {
	start, end := a.at[i].off, uint32(len(a.buf))
	if i+1 < len(a.at) {
		end = a.at[i+1].off
	}
	n := end - start
	a.buf = append(a.buf[:start], a.buf[end:]...)
	copy(a.at[i:], a.at[i+1:])
	a.at = a.at[:len(a.at)-1]
	a.lengths = 0
	for j := range a.at {
		if j >= i {
			a.at[j].off -= n
			a.at[j].key -= n
		}
		a.lengths |= 1 << (a.at[j].keyLen % 64)
	}
}

// added notes the field of key appended to buf at off (after add).
func (a *attrSet) added(off int, key string) {
	_, n := binary.Uvarint(a.buf[off+1:]) // after the tag, the KeyValue's length
	a.addedAt(off, off+1+n+1+uvarintLen(len(key)), key)
}

// addedAt notes the field of key appended to buf at off, the key at k.
func (a *attrSet) addedAt(off, k int, key string) {
	a.at = append(a.at, attrPos{off: uint32(off), key: uint32(k), keyLen: uint32(len(key))})
	a.lengths |= 1 << (len(key) % 64)
}

// setString sets a string attribute (value cut to the length limit).
func (r *recorder) setString(d *record, key, v string) {
	if key == "" {
		d.attrs.dropped++
		return
	}
	if !d.attrs.add(key, r.attrCount) {
		return
	}
	if l := r.attrLength; l >= 0 {
		v = truncate(v, l)
	}
	off := len(d.attrs.buf)
	var k int
	d.attrs.buf, k = appendStringKeyValue(d.attrs.buf, key, v)
	d.attrs.addedAt(off, k, key)
}

// setInt sets an int64 attribute.
func (r *recorder) setInt(d *record, key string, v int64) {
	if key == "" {
		d.attrs.dropped++
		return
	}
	if !d.attrs.add(key, r.attrCount) {
		return
	}
	off := len(d.attrs.buf)
	var k int
	d.attrs.buf, k = appendIntKeyValue(d.attrs.buf, key, v)
	d.attrs.addedAt(off, k, key)
}

// setFixed sets an attribute of key whose field is enc (fixedField).
func (r *recorder) setFixed(d *record, key string, enc []byte) {
	if !d.attrs.add(key, r.attrCount) {
		return
	}
	off := len(d.attrs.buf)
	d.attrs.buf = append(d.attrs.buf, enc...)
	d.attrs.added(off, key)
}

// setAttr sets any attribute: invalid ones are dropped (and counted).
func (r *recorder) setAttr(d *record, kv *attribute.KeyValue) {
	if !kv.Valid() {
		d.attrs.dropped++
		return
	}
	key := string(kv.Key)
	switch kv.Value.Type() {
	case attribute.STRING:
		r.setString(d, key, kv.Value.AsString())
		return
	case attribute.INT64:
		r.setInt(d, key, kv.Value.AsInt64())
		return
	}
	if !d.attrs.add(key, r.attrCount) {
		return
	}
	v := *kv
	if l := r.attrLength; l >= 0 {
		v = truncateAttr(v, l)
	}
	off := len(d.attrs.buf)
	d.attrs.buf = encodeKeyValue(d.attrs.buf, 9, v)
	d.attrs.added(off, key)
}

// appendStringKeyValue appends a Span's attributes field of a string
// value, its lengths computed first (no message is moved), and returns
// where in b the key is.
func appendStringKeyValue(b []byte, key, v string) ([]byte, int) {
	anyLen := 1 + uvarintLen(len(v)) + len(v)
	kvLen := 1 + uvarintLen(len(key)) + len(key) + 1 + uvarintLen(anyLen) + anyLen
	b = append(b, attrField)
	b = binary.AppendUvarint(b, uint64(kvLen))
	b = append(b, 1<<3|wireBytes) // key
	b = binary.AppendUvarint(b, uint64(len(key)))
	k := len(b)
	b = append(b, key...)
	b = append(b, 2<<3|wireBytes) // value: AnyValue
	b = binary.AppendUvarint(b, uint64(anyLen))
	return appendString(b, v), k
}

// appendIntKeyValue appends a Span's attributes field of an int value,
// and returns where in b the key is.
func appendIntKeyValue(b []byte, key string, v int64) ([]byte, int) {
	anyLen := 1 + uvarintLen64(uint64(v))
	kvLen := 1 + uvarintLen(len(key)) + len(key) + 2 + anyLen
	b = append(b, attrField)
	b = binary.AppendUvarint(b, uint64(kvLen))
	b = append(b, 1<<3|wireBytes)
	b = binary.AppendUvarint(b, uint64(len(key)))
	k := len(b)
	b = append(b, key...)
	b = append(b, 2<<3|wireBytes, byte(anyLen))
	return appendInt(b, v), k
}

// fixedField is the attributes field of kv, encoded once (the attributes
// of fixed values: operation names, tool type, llm's finish reasons).
func fixedField(kv attribute.KeyValue) []byte { return encodeKeyValue(nil, 9, kv) }

// Fields of fixed attributes, encoded once.
var (
	fieldOpWorkflow   = fixedField(attribute.String(KeyOperation, OpWorkflow))
	fieldOpStage      = fixedField(attribute.String(KeyOperation, OpStage))
	fieldOpAgent      = fixedField(attribute.String(KeyOperation, OpAgent))
	fieldOpChat       = fixedField(attribute.String(KeyOperation, OpChat))
	fieldOpTool       = fixedField(attribute.String(KeyOperation, OpTool))
	fieldToolFunction = fixedField(attribute.String(KeyToolType, "function"))
	// llm's stop reasons, and their finish_reasons fields
	stopReasons      = [...]string{"end_turn", "tool_use", "max_tokens", "stop_sequence"}
	fieldStopReasons = func() (fs [len(stopReasons)][]byte) {
		for i, r := range stopReasons {
			fs[i] = fixedField(attribute.StringSlice(KeyFinishReasons, []string{r}))
		}
		return fs
	}()
)
