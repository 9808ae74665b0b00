package web

import (
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/engine/remote"
)

//go:embed assets
var assets embed.FS

// Options say what a Site serves.
type Options struct {
	// Secret gates creating and listing episodes (the API's own check),
	// records and run data. It must be the API server's secret; "" draws
	// one (only without an API).
	Secret string
	// API is the engine/remote server the page drives; nil serves no
	// episodes (a dashboard alone).
	API *remote.Server
	// Records are the recorded episodes the replay page lists; nil none
	// (the page still replays a file the browser opens).
	Records *Records
	// Run feeds the dashboard; nil serves none.
	Run *RunFeed
	// ModelParams are the parameters the served model plays each
	// environment with (by id without its version, e.g. "craigslist"),
	// which the page's form starts from instead of the game's defaults:
	// a model plays best the texts it was trained on.
	ModelParams map[string]engine.Params
}

// Site is the web page and its data feeds in front of the API. It
// implements http.Handler.
type Site struct {
	opts Options
	mux  *http.ServeMux
}

// New returns the site of o.
func New(o Options) (*Site, error) {
	switch {
	case o.API != nil && o.Secret == "":
		o.Secret = o.API.Secret()
	case o.API != nil && o.Secret != o.API.Secret():
		return nil, fmt.Errorf("web: the site's secret is not the API server's")
	case o.Secret == "":
		b := make([]byte, 16)
		_, _ = rand.Read(b) // crypto/rand never fails on Linux
		o.Secret = hex.EncodeToString(b)
	case len(o.Secret) < remote.MinSecretLen:
		return nil, fmt.Errorf("web: secret of %d bytes: want at least %d", len(o.Secret), remote.MinSecretLen)
	}
	s := &Site{opts: o, mux: http.NewServeMux()}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		return nil, err
	}
	files := http.FileServerFS(static)
	s.mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/ui/", http.StatusSeeOther)
	})
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			http.ServeFileFS(w, r, static, name)
		}
	}
	s.mux.Handle("GET /ui/{$}", page("index.html"))
	s.mux.Handle("GET /ui/episode", page("episode.html"))
	s.mux.Handle("GET /ui/replay", page("replay.html"))
	s.mux.Handle("GET /ui/dashboard", page("dashboard.html"))
	s.mux.Handle("GET /ui/static/", http.StripPrefix("/ui/static/", files))
	s.mux.HandleFunc("GET /v1/site", s.site)
	s.mux.HandleFunc("GET /v1/records", s.records)
	s.mux.HandleFunc("GET /v1/records/{n}", s.record)
	s.mux.HandleFunc("GET /v1/run", s.run)
	if o.API != nil {
		s.mux.Handle("/v1/", o.API)
	}
	return s, nil
}

// Secret returns the secret the site's data needs.
func (s *Site) Secret() string { return s.opts.Secret }

// contentPolicy allows the page's own files only: no inline script, no
// other origin, no framing. Every text a participant wrote is put into
// the page as text, never as markup, so a model's reply cannot script it.
const contentPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// ServeHTTP implements http.Handler.
func (s *Site) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	// Seat tokens travel in URL fragments, which browsers never send; no
	// referrer leaves the page either.
	h.Set("Referrer-Policy", "no-referrer")
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		h.Set("Cache-Control", "no-store")
	}
	s.mux.ServeHTTP(w, r)
}

// SiteInfo is the answer of GET /v1/site: what the page can offer.
type SiteInfo struct {
	Episodes bool `json:"episodes"`
	Records  int  `json:"records"`
	// RecordsFile is the records file's base name.
	RecordsFile string `json:"records_file,omitempty"`
	Run         bool   `json:"run"`
	// ModelParams are Options.ModelParams: what the form starts from.
	ModelParams map[string]engine.Params `json:"model_params,omitempty"`
}

func (s *Site) site(w http.ResponseWriter, r *http.Request) {
	info := SiteInfo{Episodes: s.opts.API != nil, Run: s.opts.Run != nil, ModelParams: s.opts.ModelParams}
	if s.opts.Records != nil {
		info.Records, info.RecordsFile = s.opts.Records.Len(), filepath.Base(s.opts.Records.path)
	}
	writeJSON(w, http.StatusOK, info)
}

// authorized reports whether r carries the secret, and writes 401 if not.
func (s *Site) authorized(w http.ResponseWriter, r *http.Request, what string) bool {
	tok, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), []byte(s.opts.Secret)) == 1 {
		return true
	}
	fail(w, http.StatusUnauthorized, "%s needs the server's secret as the bearer token", what)
	return false
}

func (s *Site) records(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, "reading records") {
		return
	}
	out, bad := []RecordSummary{}, []BadLine{}
	if s.opts.Records != nil {
		out = append(out, s.opts.Records.Summaries()...)
		bad = append(bad, s.opts.Records.Bad()...)
	}
	writeJSON(w, http.StatusOK, map[string]any{"records": out, "bad": bad})
}

func (s *Site) record(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, "reading records") {
		return
	}
	n, err := strconv.Atoi(r.PathValue("n"))
	if err != nil || s.opts.Records == nil || n < 0 || n >= s.opts.Records.Len() {
		fail(w, http.StatusNotFound, "no record %q", r.PathValue("n"))
		return
	}
	rec, err := s.opts.Records.Record(n)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, rec)
}

func (s *Site) run(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, "reading the run") {
		return
	}
	if s.opts.Run == nil {
		fail(w, http.StatusNotFound, "this server follows no run (omar serve --run DIR, omar selfplay --ui ADDR)")
		return
	}
	after, episodes := -1, 3
	for name, p := range map[string]*int{"after": &after, "episodes": &episodes} {
		if v := r.URL.Query().Get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil {
				fail(w, http.StatusBadRequest, "%s %q is not an integer", name, v)
				return
			}
			*p = n
		}
	}
	page, err := s.opts.Run.Page(after, episodes)
	if err != nil {
		fail(w, http.StatusInternalServerError, "%v", err)
		return
	}
	writeJSON(w, http.StatusOK, page)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, code int, format string, args ...any) {
	writeJSON(w, code, remote.ErrorBody{Error: fmt.Sprintf(format, args...)})
}
