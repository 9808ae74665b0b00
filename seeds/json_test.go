package seeds

import (
	"encoding/json"
	"testing"
)

// TestJSONRoundTrip: a seed above 2^53 is written as its exact decimal
// string and read back; numbers (older files) and strings both read.
func TestJSONRoundTrip(t *testing.T) {
	const big = uint64(18446744073709551315) // 2^64 - 301: a double rounds it
	b, err := json.Marshal(JSON(big))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(b), `"18446744073709551315"`; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
	for _, tc := range []struct {
		in   string
		want uint64
	}{
		{`"18446744073709551315"`, big},
		{`18446744073709551315`, big},
		{`9007199254740993`, 1<<53 + 1},
		{`0`, 0},
		{`"7"`, 7},
	} {
		var s JSON
		if err := json.Unmarshal([]byte(tc.in), &s); err != nil || uint64(s) != tc.want {
			t.Errorf("%s: got %d, %v; want %d", tc.in, s, err, tc.want)
		}
	}
	for _, bad := range []string{`-1`, `1.5`, `"x"`, `"18446744073709551616"`, `true`, `""`} {
		var s JSON
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s: read as %d, want an error", bad, s)
		}
	}
	var p *JSON
	if err := json.Unmarshal([]byte(`null`), &p); err != nil || p != nil || p.Uint64() != nil {
		t.Errorf("null: got %v, %v; want nil", p, err)
	}
}
