package sysmem

import "testing"

func TestParseMemAvailable(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		ok   bool
	}{
		{"MemTotal:       16384 kB\nMemFree:         1000 kB\nMemAvailable:    8192 kB\n", 8192 << 10, true},
		{"MemTotal: 1 kB\n", 0, false},
		{"MemAvailable: lots kB\n", 0, false},
		{"MemAvailable: -5 kB\n", 0, false},
		{"MemAvailable:\n", 0, false},
	} {
		got, err := parseMemAvailable([]byte(tc.in))
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("parseMemAvailable(%q) = %d, %v; want %d, ok %v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	if n, source, err := Available(); err != nil || n <= 0 || source == "" {
		t.Errorf("Available on this machine: %d, %q, %v", n, source, err)
	}
}

func FuzzParseMemAvailable(f *testing.F) {
	f.Add([]byte("MemAvailable:    8192 kB\n"))
	f.Add([]byte("MemAvailable: 99999999999999999999 kB"))
	f.Fuzz(func(t *testing.T, b []byte) {
		n, err := parseMemAvailable(b)
		if err == nil && (n < 0 || n > 1<<60) {
			t.Errorf("memAvailable = %d without error", n)
		}
	})
}
