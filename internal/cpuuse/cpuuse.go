// Package cpuuse measures how many cores are free for this process, so that
// a job can size a pool of busy-waiting threads (ggml's) to the cores it can
// have: too many threads on cores another process is using spin at every
// barrier and run slower than one thread.
//
// A core counts as free for this process when the machine left it idle or
// this process itself kept it busy, measured between two readings of
// /proc/stat and /proc/self/stat (Linux). Elsewhere, or when the window is
// too short to say, Free reports !ok and the caller keeps what it had.
package cpuuse

import (
	"bytes"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// ticksPerSecond is Linux's USER_HZ, the unit of /proc/stat and
// /proc/<pid>/stat: 100 on every architecture Go supports.
const ticksPerSecond = 100

// minWindow is the shortest window Free measures over: at 100 ticks per
// second a shorter one rounds a core's use by more than a tenth.
const minWindow = 200 * time.Millisecond

// Sample is one reading of the machine's idle time and this process's CPU
// time.
type Sample struct {
	at         time.Time
	idle, self float64 // seconds summed over the cores
	ok         bool
}

// Read takes a sample now.
func Read() Sample {
	s := Sample{at: time.Now()}
	stat, err1 := os.ReadFile("/proc/stat")
	self, err2 := os.ReadFile("/proc/self/stat")
	if err1 != nil || err2 != nil {
		return s
	}
	var ok1, ok2 bool
	s.idle, ok1 = machineIdle(stat)
	s.self, ok2 = processTime(self)
	s.ok = ok1 && ok2
	return s
}

// Free is the mean number of cores free for this process between s and
// later: the machine's idle cores plus those this process used. ok is false
// when either sample could not be read or the window is shorter than
// 200 ms.
func (s Sample) Free(later Sample) (cores float64, ok bool) {
	d := later.at.Sub(s.at)
	if !s.ok || !later.ok || d < minWindow {
		return 0, false
	}
	return (later.idle - s.idle + later.self - s.self) / d.Seconds(), true
}

// Threads is the thread count for free cores: free rounded to the nearest
// core, at least 1 and at most Usable(). Rounding, not truncating: two
// trainer threads beat one while another process keeps up to about half a
// core busy, and lose beyond
// (docs/results/2026-12-03-selfplay-iteration-issue-14.md).
func Threads(free float64) int {
	return max(1, min(Usable(), int(free+0.5)))
}

// Usable is the number of cores this process may run on: the CPUs of its
// affinity mask, bounded by GOMAXPROCS (which follows a container's CPU
// limit).
func Usable() int { return min(runtime.NumCPU(), runtime.GOMAXPROCS(0)) }

// machineIdle parses the first line of /proc/stat ("cpu user nice system
// idle iowait …") into the seconds all cores spent idle or waiting for I/O.
func machineIdle(stat []byte) (float64, bool) {
	line, _, _ := bytes.Cut(stat, []byte{'\n'})
	f := strings.Fields(string(line))
	if len(f) < 6 || f[0] != "cpu" {
		return 0, false
	}
	return seconds(f[4], f[5]) // idle, iowait
}

// processTime parses /proc/self/stat into the process's user plus system
// seconds (fields 14 and 15; the command name, field 2, is parenthesised
// and may hold spaces and parentheses, so fields are counted from the last
// ')').
func processTime(stat []byte) (float64, bool) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state), so field n is f[n-3].
	if len(f) < 13 {
		return 0, false
	}
	return seconds(f[11], f[12]) // utime, stime
}

// seconds is the sum of two clock-tick counts, in seconds.
func seconds(a, b string) (float64, bool) {
	x, err1 := strconv.ParseUint(a, 10, 64)
	y, err2 := strconv.ParseUint(b, 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(x+y) / ticksPerSecond, true
}

// ThreadsPerCore bounds thread settings: MaxThreads is this many threads
// per core of the machine. ggml's threads busy-wait at every barrier, so
// more threads than cores only slows a job down; four per core leaves
// room for a config written on a larger machine while refusing a typo
// like 100000 (which started ~800 spinning threads and made no progress).
const ThreadsPerCore = 4

// MaxThreads is the largest thread count a setting may ask for on this
// machine: ThreadsPerCore × its logical cores.
func MaxThreads() int { return ThreadsPerCore * max(1, runtime.NumCPU()) }
