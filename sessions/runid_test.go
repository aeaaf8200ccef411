package sessions

import "testing"

// A run id is printed by skein runs ls and show: it holds no control
// character, C0, DEL or C1 (U+009B is a one-character CSI).
func TestCheckRunID(t *testing.T) {
	for _, id := range []string{"", "a\nb", "a\x1b[2Jb", "a\x7fb", "a\u009b2Jb", "a\u0085b"} {
		if err := checkRunID(id); err == nil {
			t.Errorf("run id %q accepted", id)
		}
	}
	for _, id := range []string{"run-1", "test-20261126/a.star::test_x/ü"} {
		if err := checkRunID(id); err != nil {
			t.Errorf("run id %q refused: %v", id, err)
		}
	}
}
