package main

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"testing"

	"github.com/skein-dev/skein/serve"
)

// TestTokenEntropy: random tokens of 16 bytes or more pass the check a
// server beyond loopback makes, every time; short, repeated and
// one-class tokens do not.
func TestTokenEntropy(t *testing.T) {
	// Random tokens as the docs make them (32 bytes) always pass, in hex
	// or base64. 16 bytes in hex are exactly 128 bits; 16 bytes in base64
	// are not promised: 22 characters with no upper-case letter and no
	// symbol (about once in 300,000) count as 114 bits.
	for range 2000 {
		b := make([]byte, 32)
		rand.Read(b)
		short := hex.EncodeToString(b[:16])
		for _, tok := range []string{short, hex.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), base64.StdEncoding.EncodeToString(b), serve.NewToken()} {
			if bits := tokenEntropy(tok); bits < minTokenBits {
				t.Fatalf("random token %q: %.1f bits", tok, bits)
			}
		}
	}
	for _, tok := range []string{"x", "secret", "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"password-password-password", "0123456789abcdef0123456789abcdef0123456789abcdef",
		"abababababababababababababababababababab", "0123456789abcdef0123456789abcde"} {
		if bits := tokenEntropy(tok); bits >= minTokenBits {
			t.Errorf("weak token %q: %.1f bits", tok, bits)
		}
	}
	if err := checkServeToken("x", false, "127.0.0.1:7600", ""); err != nil {
		t.Errorf("loopback: %v", err)
	}
	if err := checkServeToken("x", false, "[::]:7600", "t.txt"); err == nil {
		t.Error("a weak token on [::] was accepted")
	}
}
