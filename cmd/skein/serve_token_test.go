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
	for range 2000 {
		b := make([]byte, 16)
		rand.Read(b)
		for _, tok := range []string{hex.EncodeToString(b), base64.RawURLEncoding.EncodeToString(b), serve.NewToken()} {
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
