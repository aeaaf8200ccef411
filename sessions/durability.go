package sessions

import "fmt"

// Durability is what a durable backend's committed writes survive. It is
// a backend option (sqlite.WithDurability); the CLI's --durability flag
// and SKEIN_DURABILITY set it.
type Durability string

// Durability levels.
const (
	// DurabilityProcess (the default) survives any crash of the process:
	// a commit is in the operating system's hands when it returns. An
	// operating system crash or a power cut may lose the last commits,
	// never more, and never leaves a session half-written.
	DurabilityProcess Durability = "process"
	// DurabilityFull also survives an operating system crash or a power
	// cut: every commit is flushed to the disk (fsync) before it returns.
	DurabilityFull Durability = "full"
)

// Durabilities lists the levels, weakest first.
var Durabilities = []Durability{DurabilityProcess, DurabilityFull}

// ParseDurability returns the level named s.
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case DurabilityProcess, DurabilityFull:
		return d, nil
	}
	return "", fmt.Errorf("unknown durability '%s' (want %s or %s)", Escape(s), DurabilityProcess, DurabilityFull)
}
