package llamacpp

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/ebitengine/purego"
)

// ggml_log_level values (ggml.h).
const (
	ggmlLogLevelNone  = 0
	ggmlLogLevelDebug = 1
	ggmlLogLevelInfo  = 2
	ggmlLogLevelWarn  = 3
	ggmlLogLevelError = 4
	ggmlLogLevelCont  = 5 // continuation of the previous message
)

var (
	// void llama_log_set(ggml_log_callback log_callback, void * user_data);
	// (also installs the callback for ggml)
	llamaLogSet func(cb uintptr, userData uintptr)
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaLogSet, "llama_log_set"}})
	})
}

var (
	logger     atomic.Pointer[slog.Logger]
	logOnce    sync.Once
	logPartial struct {
		sync.Mutex
		level int32
		buf   strings.Builder
	}
)

// SetLogger routes llama.cpp and ggml log lines to l (nil restores
// slog.Default()). llama.cpp's info and debug chatter goes to Debug, its
// warnings to Warn and errors to Error.
func SetLogger(l *slog.Logger) { logger.Store(l) }

func installLogger() {
	logOnce.Do(func() {
		// typedef void (*ggml_log_callback)(enum ggml_log_level level, const char * text, void * user_data);
		cb := purego.NewCallback(func(level int32, text *byte, _ uintptr) uintptr {
			logLine(level, goString(text))
			return 0
		})
		llamaLogSet(cb, 0)
	})
}

// logLine assembles llama.cpp's partial lines (it logs fragments and CONT
// continuations) and emits whole lines.
func logLine(level int32, text string) {
	p := &logPartial
	p.Lock()
	defer p.Unlock()
	if level != ggmlLogLevelCont {
		p.level = level
	}
	p.buf.WriteString(text)
	s := p.buf.String()
	if !strings.HasSuffix(s, "\n") {
		return
	}
	p.buf.Reset()
	l := logger.Load()
	if l == nil {
		l = slog.Default()
	}
	lvl := slog.LevelDebug
	switch p.level {
	case ggmlLogLevelWarn:
		lvl = slog.LevelWarn
	case ggmlLogLevelError:
		lvl = slog.LevelError
	}
	for _, line := range strings.Split(strings.TrimRight(s, "\n"), "\n") {
		l.Log(context.Background(), lvl, line, "source", "llama.cpp")
	}
}

// goString copies a NUL-terminated C string.
func goString(p *byte) string {
	if p == nil {
		return ""
	}
	n := 0
	for *(*byte)(unsafe.Add(unsafe.Pointer(p), n)) != 0 {
		n++
	}
	return string(unsafe.Slice(p, n))
}

// cString returns a NUL-terminated copy of s for C; keep it alive (use it
// after the call, or runtime.KeepAlive) while C reads it.
func cString(s string) []byte {
	b := make([]byte, len(s)+1)
	copy(b, s)
	return b
}
