// Package storekey seals the payloads a durable session store writes
// (message bodies, event data, titles, summaries, first prompts,
// metadata) with AES-256-GCM, so that the database holds no plaintext of
// them: encryption at rest (skein's --encryption-key-file and
// SKEIN_STORE_KEY_FILE).
//
// A key is 32 random bytes, kept base64-encoded in a file (Load). Each
// value is sealed on its own with a fresh random 12-byte nonce; its
// envelope is
//
//	version (1 byte, 1) | key id (8 bytes) | nonce (12 bytes) | ciphertext | GCM tag (16 bytes)
//
// and the field it was sealed for (its name, e.g. "title") is the GCM
// additional data, so a value moved into another field fails to open.
// The key id is the first 8 bytes of SHA-256 over a fixed label and the
// key: it names the key a value needs without revealing it, which is
// what a rotation (skein migrate --rotate-key) looks for. GCM's tag is
// the value's integrity check: a sealed value carries no other checksum.
package storekey

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// Size is the length of a key in bytes (AES-256).
const Size = 32

// IDSize is the length of a key id in bytes.
const IDSize = 8

const (
	version   = 1
	nonceSize = 12
	tagSize   = 16
	// Overhead is how many bytes sealing adds to a value.
	Overhead = 1 + IDSize + nonceSize + tagSize
)

// ErrWrongKey means a sealed value needs another key than the one given.
var ErrWrongKey = errors.New("sealed with another key")

// ErrNoKey means a sealed value was read without a key.
var ErrNoKey = errors.New("encrypted, and no key was given")

// ErrDamaged means a sealed value does not open with its key: its bytes
// were changed after it was sealed.
var ErrDamaged = errors.New("does not decrypt: its authentication tag does not match, so it was changed after it was written (a damaged disk, an edit by hand)")

// ID is a key's id.
type ID [IDSize]byte

// String returns the id in hex.
func (id ID) String() string { return hex.EncodeToString(id[:]) }

// Key is an AES-256-GCM key. Its methods are safe for concurrent use.
type Key struct {
	id   ID
	aead cipher.AEAD
}

// New returns the key of raw, which must be Size bytes.
func New(raw []byte) (*Key, error) {
	if len(raw) != Size {
		return nil, fmt.Errorf("a store key is %d bytes, this one is %d", Size, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, err
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, err
	}
	k := &Key{aead: aead}
	sum := sha256.Sum256(append([]byte("skein store key id\x00"), raw...))
	copy(k.id[:], sum[:])
	return k, nil
}

// Parse returns the key whose base64 text (standard or URL alphabet,
// padded or not; white space around it ignored) is text.
func Parse(text []byte) (*Key, error) {
	s := string(bytes.TrimSpace(text))
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if raw, err := enc.DecodeString(s); err == nil {
			return New(raw)
		}
	}
	return nil, fmt.Errorf("not base64 text of %d random bytes (make one with `head -c %d /dev/urandom | base64`)", Size, Size)
}

// Load reads the key file at path: the base64 text of Size random bytes.
// A file that others may read is refused: the key is as secret as the
// data it protects.
func Load(path string) (*Key, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("key file %s: mode %04o lets other users read it: chmod 600 it", path, info.Mode().Perm())
	}
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("key file: %w", err)
	}
	k, err := Parse(text)
	if err != nil {
		return nil, fmt.Errorf("key file %s: %w", path, err)
	}
	return k, nil
}

// Generate returns the base64 text of a new random key (a key file's
// contents).
func Generate() []byte {
	raw := make([]byte, Size)
	rand.Read(raw) // never fails (crypto/rand)
	return []byte(base64.StdEncoding.EncodeToString(raw) + "\n")
}

// ID returns the key's id.
func (k *Key) ID() ID { return k.id }

// Seal returns the envelope of plain sealed for field (see the package
// doc).
func (k *Key) Seal(field string, plain []byte) []byte {
	out := make([]byte, 1+IDSize+nonceSize, Overhead+len(plain))
	out[0] = version
	copy(out[1:], k.id[:])
	rand.Read(out[1+IDSize:]) // never fails (crypto/rand)
	return k.aead.Seal(out, out[1+IDSize:], plain, []byte(field))
}

// Open returns the plaintext of envelope, sealed for field. A value
// sealed with another key is ErrWrongKey, one that does not authenticate
// ErrDamaged; both name the key ids.
func (k *Key) Open(field string, envelope []byte) ([]byte, error) {
	id, err := EnvelopeID(envelope)
	if err != nil {
		return nil, err
	}
	if id != k.id {
		return nil, fmt.Errorf("%w (key id %s; the key given is %s)", ErrWrongKey, id, k.id)
	}
	nonce := envelope[1+IDSize : 1+IDSize+nonceSize]
	plain, err := k.aead.Open(nil, nonce, envelope[1+IDSize+nonceSize:], []byte(field))
	if err != nil {
		return nil, fmt.Errorf("%w (key id %s)", ErrDamaged, id)
	}
	return plain, nil
}

// EnvelopeID returns the id of the key envelope was sealed with.
func EnvelopeID(envelope []byte) (ID, error) {
	var id ID
	if len(envelope) < Overhead || envelope[0] != version {
		return id, fmt.Errorf("%w: not a sealed value of this skein (%d bytes)", ErrDamaged, len(envelope))
	}
	copy(id[:], envelope[1:])
	return id, nil
}

// Rotation counts what a rotation (the backends' RotateKey) sealed anew.
type Rotation struct {
	Sessions, Messages, Events int
	Runs                       int // workflow run records (with their steps)
}
