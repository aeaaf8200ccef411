package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkSkeinTest runs `skein test` in-process on 1,000 trivial tests
// across 50 files, serially and with -parallel 2. ns/op is the wall time
// of one whole run (discovery included); tests/s is the throughput.
//
//	go test ./cmd/skein -run '^$' -bench SkeinTest
func BenchmarkSkeinTest(b *testing.B) {
	const files, perFile = 50, 20
	dir := b.TempDir()
	for f := 0; f < files; f++ {
		var src strings.Builder
		for i := 0; i < perFile; i++ {
			fmt.Fprintf(&src, "def test_%02d():\n    assert.eq(%d + 1, %d)\n\n", i, i, i+1)
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%02d_test.star", f)), []byte(src.String()), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	for _, parallel := range []int{1, 2} {
		name := "serial"
		if parallel > 1 {
			name = fmt.Sprintf("parallel%d", parallel)
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				var out, errOut bytes.Buffer
				code := skein([]string{"test", "-parallel", fmt.Sprint(parallel), dir}, stdio{in: &bytes.Buffer{}, out: &out, err: &errOut})
				if code != exitOK || stripElapsed(out.String()) != fmt.Sprintf("%d passed, 0 failed\n", files*perFile) {
					b.Fatalf("exit %d\n%s%s", code, out.String(), errOut.String())
				}
			}
			b.ReportMetric(float64(files*perFile*b.N)/b.Elapsed().Seconds(), "tests/s")
		})
	}
}

// BenchmarkRunStartup builds the skein binary and times `skein run` of a
// one-line script as a user would run it, with the default store (SQLite,
// created in the first run) and with --store memory, beside /bin/true,
// one after the other 20 times per iteration. It reports the median wall
// time and CPU time (user and system) of each, the ratios of the
// medians to /bin/true's, and the median count of minor page faults
// (faults-*, where the system reports them): on a shared machine the CPU
// times, ratios and counts mean more than the wall times.
//
// nethttp is a Go program built the same way that imports net/http and
// prints; memory/nethttp and cpu-memory/nethttp are the medians of the
// ratios of each `run --store memory` to the nethttp run that follows it
// (the target is at most 1.3).
//
// memory-static is the same build made with CGO_ENABLED=0: Go then links
// no C library and the binary is static (skein needs no cgo; see
// docs/performance.md, "Start-up").
//
// With SKEIN_STARTUP_COMPARE set to another skein binary (an older build,
// say), its `run --store memory` of the same script runs in the same
// rounds, and memory/compare and cpu-memory/compare are this build's
// medians over its.
//
// With SKEIN_STARTUP_DIR set to a directory, the three binaries are built
// there when it does not hold them yet and reused when it does, so that
// a measurement can run without building anything (on a shared machine,
// build first, then measure in a quiet moment); remove the directory
// after changing the code.
//
//	go test ./cmd/skein -run '^$' -bench RunStartup -benchtime 1x
func BenchmarkRunStartup(b *testing.B) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		b.Skip("no go tool to build the binary:", err)
	}
	trueBin, err := exec.LookPath("true")
	if err != nil {
		b.Skip("no true command to compare with:", err)
	}
	dir := b.TempDir()
	binDir := dir
	if d := os.Getenv("SKEIN_STARTUP_DIR"); d != "" {
		binDir = d
	}
	bin, static := filepath.Join(binDir, "skein"), filepath.Join(binDir, "skein-static")
	built := func(path string) bool {
		_, err := os.Stat(path)
		return binDir != dir && err == nil
	}
	for _, out := range []string{bin, static} {
		if built(out) {
			continue
		}
		build := exec.Command(goTool, "build", "-o", out, ".")
		if out == static {
			build.Env = append(os.Environ(), "CGO_ENABLED=0")
		}
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build: %v\n%s", err, out)
		}
	}
	// nethttp is a Go program built the same way (go build, cgo as the
	// toolchain defaults) that imports net/http and prints: the floor of
	// a Go binary that links the network stack, which skein does.
	hello, nethttp := filepath.Join(dir, "hello"), filepath.Join(binDir, "nethttp")
	if err := os.MkdirAll(hello, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string]string{
		"go.mod":  "module hello\n\ngo 1.24\n",
		"main.go": "package main\n\nimport (\n\t\"fmt\"\n\t\"net/http\"\n)\n\nvar _ = http.DefaultClient\n\nfunc main() { fmt.Println(1 + 1) }\n",
	} {
		if err := os.WriteFile(filepath.Join(hello, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	if !built(nethttp) {
		build := exec.Command(goTool, "build", "-o", nethttp, ".")
		build.Dir = hello
		if out, err := build.CombinedOutput(); err != nil {
			b.Fatalf("go build hello: %v\n%s", err, out)
		}
	}
	script := filepath.Join(dir, "one.star")
	if err := os.WriteFile(script, []byte("print(1 + 1)\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	type command struct {
		name string
		argv []string
		out  string
	}
	commands := []command{
		{"true", []string{trueBin}, ""},
		{"sqlite", []string{bin, "run", script}, "2\n"},
		{"memory", []string{bin, "run", "--store", "memory", script}, "2\n"},
		{"memory-static", []string{static, "run", "--store", "memory", script}, "2\n"},
		{"nethttp", []string{nethttp}, "2\n"},
	}
	if other := os.Getenv("SKEIN_STARTUP_COMPARE"); other != "" {
		commands = append(commands, command{"compare", []string{other, "run", "--store", "memory", script}, "2\n"})
	}
	wall := make([][]time.Duration, len(commands))
	cpu := make([][]time.Duration, len(commands))
	faults := make([][]int64, len(commands))
	for b.Loop() {
		for range 20 {
			for i, c := range commands {
				cmd := exec.Command(c.argv[0], c.argv[1:]...)
				cmd.Dir = dir // the default store, .skein/sessions.db, goes here
				start := time.Now()
				out, err := cmd.Output()
				wall[i] = append(wall[i], time.Since(start))
				if err != nil || string(out) != c.out {
					b.Fatalf("%s: %v %q", c.name, err, out)
				}
				cpu[i] = append(cpu[i], cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
				if n, ok := minorFaults(cmd.ProcessState); ok {
					faults[i] = append(faults[i], n)
				}
			}
		}
	}
	med := func(ds []time.Duration) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return float64(ds[len(ds)/2].Microseconds()) / 1000
	}
	for i, c := range commands {
		b.ReportMetric(med(wall[i]), "ms-"+c.name)
		b.ReportMetric(med(cpu[i]), "cpu-ms-"+c.name)
		if len(faults[i]) > 0 {
			f := slices.Clone(faults[i])
			slices.Sort(f)
			b.ReportMetric(float64(f[len(f)/2]), "faults-"+c.name)
		}
		if i > 0 {
			b.ReportMetric(med(wall[i])/med(wall[0]), c.name+"/true")
			b.ReportMetric(med(cpu[i])/max(med(cpu[0]), 0.001), "cpu-"+c.name+"/true")
		}
	}
	// each run of memory over the nethttp run right after it, in the
	// same round: the median of those ratios
	pairs := func(xs, ys []time.Duration) float64 {
		r := make([]float64, len(xs))
		for i := range xs {
			r[i] = float64(xs[i]) / max(float64(ys[i]), 1)
		}
		slices.Sort(r)
		return r[len(r)/2]
	}
	b.ReportMetric(pairs(wall[2], wall[4]), "memory/nethttp")
	b.ReportMetric(pairs(cpu[2], cpu[4]), "cpu-memory/nethttp")
	if len(commands) == 6 {
		b.ReportMetric(med(wall[2])/med(wall[5]), "memory/compare")
		b.ReportMetric(med(cpu[2])/max(med(cpu[5]), 0.001), "cpu-memory/compare")
	}
}
