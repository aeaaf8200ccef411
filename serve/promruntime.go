package serve

import (
	"bufio"
	"bytes"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

// The go_* and process_* families: what client_golang's Go collector (in
// its default configuration) and process collector reported, with the
// same names, types and help texts, read at every scrape.

// goMetric is one go_memstats_* family. client_golang read them from
// runtime/metrics; skein reads runtime.MemStats, whose fields are
// documented to equal the sums the help texts give, because linking
// runtime/metrics costs every command its initialisation (a table of
// about 100 descriptions).
type goMetric struct {
	name, help, typ string
	value           func(m *runtime.MemStats) float64
}

// goMetrics are the go_memstats_* families but go_memstats_last_gc_time_seconds.
var goMetrics = []goMetric{
	{"go_memstats_alloc_bytes", "Number of bytes allocated in heap and currently in use. Equals to /memory/classes/heap/objects:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"go_memstats_alloc_bytes_total", "Total number of bytes allocated in heap until now, even if released already. Equals to /gc/heap/allocs:bytes.", "counter",
		func(m *runtime.MemStats) float64 { return float64(m.TotalAlloc) }},
	{"go_memstats_buck_hash_sys_bytes", "Number of bytes used by the profiling bucket hash table. Equals to /memory/classes/profiling/buckets:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.BuckHashSys) }},
	{"go_memstats_frees_total", "Total number of heap objects frees. Equals to /gc/heap/frees:objects + /gc/heap/tiny/allocs:objects.", "counter",
		func(m *runtime.MemStats) float64 {
			return float64(m.Frees)
		}},
	{"go_memstats_gc_sys_bytes", "Number of bytes used for garbage collection system metadata. Equals to /memory/classes/metadata/other:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.GCSys) }},
	{"go_memstats_heap_alloc_bytes", "Number of heap bytes allocated and currently in use, same as go_memstats_alloc_bytes. Equals to /memory/classes/heap/objects:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.HeapAlloc) }},
	{"go_memstats_heap_idle_bytes", "Number of heap bytes waiting to be used. Equals to /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.HeapIdle)
		}},
	{"go_memstats_heap_inuse_bytes", "Number of heap bytes that are in use. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.HeapInuse)
		}},
	{"go_memstats_heap_objects", "Number of currently allocated objects. Equals to /gc/heap/objects:objects.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.HeapObjects) }},
	{"go_memstats_heap_released_bytes", "Number of heap bytes released to OS. Equals to /memory/classes/heap/released:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.HeapReleased) }},
	{"go_memstats_heap_sys_bytes", "Number of heap bytes obtained from system. Equals to /memory/classes/heap/objects:bytes + /memory/classes/heap/unused:bytes + /memory/classes/heap/released:bytes + /memory/classes/heap/free:bytes.", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.HeapSys)
		}},
	{"go_memstats_mallocs_total", "Total number of heap objects allocated, both live and gc-ed. Semantically a counter version for go_memstats_heap_objects gauge. Equals to /gc/heap/allocs:objects + /gc/heap/tiny/allocs:objects.", "counter",
		func(m *runtime.MemStats) float64 {
			return float64(m.Mallocs)
		}},
	{"go_memstats_mcache_inuse_bytes", "Number of bytes in use by mcache structures. Equals to /memory/classes/metadata/mcache/inuse:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.MCacheInuse) }},
	{"go_memstats_mcache_sys_bytes", "Number of bytes used for mcache structures obtained from system. Equals to /memory/classes/metadata/mcache/inuse:bytes + /memory/classes/metadata/mcache/free:bytes.", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.MCacheSys)
		}},
	{"go_memstats_mspan_inuse_bytes", "Number of bytes in use by mspan structures. Equals to /memory/classes/metadata/mspan/inuse:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.MSpanInuse) }},
	{"go_memstats_mspan_sys_bytes", "Number of bytes used for mspan structures obtained from system. Equals to /memory/classes/metadata/mspan/inuse:bytes + /memory/classes/metadata/mspan/free:bytes.", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.MSpanSys)
		}},
	{"go_memstats_next_gc_bytes", "Number of heap bytes when next garbage collection will take place. Equals to /gc/heap/goal:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.NextGC) }},
	{"go_memstats_other_sys_bytes", "Number of bytes used for other system allocations. Equals to /memory/classes/other:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.OtherSys) }},
	{"go_memstats_stack_inuse_bytes", "Number of bytes obtained from system for stack allocator in non-CGO environments. Equals to /memory/classes/heap/stacks:bytes.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.StackInuse) }},
	{"go_memstats_stack_sys_bytes", "Number of bytes obtained from system for stack allocator. Equals to /memory/classes/heap/stacks:bytes + /memory/classes/os-stacks:bytes.", "gauge",
		func(m *runtime.MemStats) float64 {
			return float64(m.StackSys)
		}},
	{"go_memstats_sys_bytes", "Number of bytes obtained from system. Equals to /memory/classes/total:byte.", "gauge",
		func(m *runtime.MemStats) float64 { return float64(m.Sys) }},
}

// gauge returns a family of one series, of type typ, with value v.
func gauge(typ, name, help string, v float64) *family {
	f := newFamily(typ, name, help)
	f.Set(v)
	return f
}

// goFamilies returns the Go runtime's families, read now.
func goFamilies() []*family {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	out := make([]*family, 0, len(goMetrics)+8)
	for _, m := range goMetrics {
		out = append(out, gauge(m.typ, m.name, m.help, m.value(&ms)))
	}
	out = append(out,
		gauge("gauge", "go_gc_gogc_percent", "Heap size target percentage configured by the user, otherwise 100. This value is set by the GOGC environment variable, and the runtime/debug.SetGCPercent function. Sourced from /gc/gogc:percent.",
			float64(uint64(gogc()))),
		gauge("gauge", "go_gc_gomemlimit_bytes", "Go runtime memory limit configured by the user, otherwise math.MaxInt64. This value is set by the GOMEMLIMIT environment variable, and the runtime/debug.SetMemoryLimit function. Sourced from /gc/gomemlimit:bytes.",
			float64(debug.SetMemoryLimit(-1))),
		gauge("gauge", "go_sched_gomaxprocs_threads", "The current runtime.GOMAXPROCS setting, or the number of operating system threads that can execute user-level Go code simultaneously. Sourced from /sched/gomaxprocs:threads.",
			float64(runtime.GOMAXPROCS(0))))

	var gc debug.GCStats
	gc.PauseQuantiles = make([]time.Duration, len(summaryQuantiles))
	debug.ReadGCStats(&gc)
	pauses := newFamily("summary", "go_gc_duration_seconds", "A summary of the wall-time pause (stop-the-world) duration in garbage collection cycles.")
	s := pauses.WithLabelValues()
	for _, q := range gc.PauseQuantiles {
		s.quantiles = append(s.quantiles, q.Seconds())
	}
	s.sum, s.count = gc.PauseTotal.Seconds(), uint64(gc.NumGC)
	threads, _ := runtime.ThreadCreateProfile(nil)
	info := newFamily("gauge", "go_info", "Information about the Go environment.", "version")
	info.WithLabelValues(runtime.Version()).Set(1)
	return append(out, pauses, info,
		gauge("gauge", "go_memstats_last_gc_time_seconds", "Number of seconds since 1970 of last garbage collection.", float64(gc.LastGC.UnixNano())/1e9),
		gauge("gauge", "go_goroutines", "Number of goroutines that currently exist.", float64(runtime.NumGoroutine())),
		gauge("gauge", "go_threads", "Number of OS threads created.", float64(threads)))
}

// gogc is the garbage collector's GOGC percentage as the runtime read it
// from the environment at start (skein never changes it): -1 for "off",
// reported as runtime/metrics does, as an unsigned number.
func gogc() int64 {
	p := os.Getenv("GOGC")
	if p == "off" {
		return -1
	}
	if n, err := strconv.ParseInt(p, 10, 32); err == nil {
		return max(n, -1)
	}
	return 100
}

// userHZ is the unit of the CPU times in /proc/self/stat (USER_HZ, 100
// on every Linux architecture Go runs on).
const userHZ = 100

// processFamilies returns the process's families, read from /proc: none
// where there is no /proc (the systems other than Linux), and those of a
// file that cannot be read are left out.
func processFamilies() []*family {
	var out []*family
	if stat, err := os.ReadFile("/proc/self/stat"); err == nil {
		// The fields after the command, which is in parentheses and may hold anything.
		if i := bytes.LastIndexByte(stat, ')'); i >= 0 {
			f := strings.Fields(string(stat[i+1:]))
			field := func(n int) float64 { // n counts from 1 at the pid, as in proc(5)
				if n-3 < len(f) {
					v, _ := strconv.ParseFloat(f[n-3], 64)
					return v
				}
				return 0
			}
			out = append(out,
				gauge("counter", "process_cpu_seconds_total", "Total user and system CPU time spent in seconds.", (field(14)+field(15))/userHZ),
				gauge("gauge", "process_virtual_memory_bytes", "Virtual memory size in bytes.", field(23)),
				gauge("gauge", "process_resident_memory_bytes", "Resident memory size in bytes.", field(24)*float64(os.Getpagesize())))
			if boot, ok := bootTime(); ok {
				out = append(out, gauge("gauge", "process_start_time_seconds", "Start time of the process since unix epoch in seconds.", boot+field(22)/userHZ))
			}
		}
	}
	if d, err := os.Open("/proc/self/fd"); err == nil {
		names, err := d.Readdirnames(-1)
		d.Close()
		if err == nil {
			out = append(out, gauge("gauge", "process_open_fds", "Number of open file descriptors.", float64(len(names))))
		}
	}
	if files, space, ok := limits(); ok {
		out = append(out,
			gauge("gauge", "process_max_fds", "Maximum number of open file descriptors.", files),
			gauge("gauge", "process_virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes.", space))
	}
	if in, out2, ok := netOctets(); ok {
		out = append(out,
			gauge("counter", "process_network_receive_bytes_total", "Number of bytes received by the process over the network.", in),
			gauge("counter", "process_network_transmit_bytes_total", "Number of bytes sent by the process over the network.", out2))
	}
	return out
}

// bootTime reads the system's boot time (seconds since the epoch) from
// /proc/stat.
func bootTime() (float64, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "btime "); ok {
			t, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			return t, err == nil
		}
	}
	return 0, false
}

// limits reads the soft limits on open files and on address space from
// /proc/self/limits ("unlimited" is 2^64 - 1).
func limits() (files, space float64, ok bool) {
	data, err := os.ReadFile("/proc/self/limits")
	if err != nil {
		return 0, 0, false
	}
	soft := func(line string) (float64, bool) {
		fields := strings.Fields(line)
		for _, f := range fields { // the soft limit is the first field after the name, which is words
			if f == "unlimited" {
				return math.MaxUint64, true
			}
			if v, err := strconv.ParseUint(f, 10, 64); err == nil {
				return float64(v), true
			}
		}
		return 0, false
	}
	var okFiles, okSpace bool
	for line := range strings.Lines(string(data)) {
		switch {
		case strings.HasPrefix(line, "Max open files "):
			files, okFiles = soft(line)
		case strings.HasPrefix(line, "Max address space "):
			space, okSpace = soft(line)
		}
	}
	return files, space, okFiles && okSpace
}

// netOctets reads the bytes received and sent over the network (InOctets
// and OutOctets of IpExt) from /proc/self/net/netstat.
func netOctets() (in, out float64, ok bool) {
	data, err := os.ReadFile("/proc/self/net/netstat")
	if err != nil {
		return 0, 0, false
	}
	lines := strings.Split(string(data), "\n")
	for i := 0; i+1 < len(lines); i++ {
		names, values := strings.Fields(lines[i]), strings.Fields(lines[i+1])
		if len(names) == 0 || names[0] != "IpExt:" || len(values) != len(names) || values[0] != "IpExt:" {
			continue
		}
		for j, n := range names {
			v, _ := strconv.ParseFloat(values[j], 64)
			switch n {
			case "InOctets":
				in = v
			case "OutOctets":
				out = v
			}
		}
		return in, out, true
	}
	return 0, 0, true
}
