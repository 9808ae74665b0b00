// Package sysmem reports the memory this process can still allocate, so
// that a job can refuse a request that would not fit with a clear error
// before it allocates, instead of being killed by the kernel halfway.
package sysmem

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
)

// Available is MemAvailable from /proc/meminfo, or what the
// process's cgroup still allows when that is less.
func Available() (int64, string, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, "", err
	}
	avail, err := parseMemAvailable(b)
	if err != nil {
		return 0, "", err
	}
	source := "MemAvailable in /proc/meminfo"
	if room, ok := cgroupRoom(); ok && room < avail {
		avail, source = room, "the cgroup's memory.max less memory.current"
	}
	return avail, source, nil
}

// parseMemAvailable parses the MemAvailable line of /proc/meminfo (kB).
func parseMemAvailable(meminfo []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(meminfo))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "MemAvailable:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > 1<<50 {
			return 0, fmt.Errorf("/proc/meminfo: bad MemAvailable %q", rest)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("/proc/meminfo has no MemAvailable line")
}

// cgroupRoom is memory.max − memory.current of a cgroup v2 with a limit.
func cgroupRoom() (int64, bool) {
	read := func(name string) (int64, bool) {
		b, err := os.ReadFile("/sys/fs/cgroup/" + name)
		if err != nil {
			return 0, false
		}
		n, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return n, err == nil
	}
	lim, ok := read("memory.max") // "max" when unlimited: not a number
	if !ok {
		return 0, false
	}
	cur, ok := read("memory.current")
	if !ok {
		return 0, false
	}
	return max(lim-cur, 0), true
}

// ByteSize writes n in binary units.
func ByteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
