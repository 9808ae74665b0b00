package proxy

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/omar-selfplay/omar/engine/remote"
	"github.com/omar-selfplay/omar/envs"
	"github.com/omar-selfplay/omar/llamacpp/llamatest"
	"github.com/omar-selfplay/omar/model"
	"github.com/omar-selfplay/omar/players"
)

// TestMount checks omar serve's --policy routing: engine routes reach
// the engine server, completion routes the proxy, and a call tied to a
// seat (checked against the engine through the same address) is recorded.
func TestMount(t *testing.T) {
	lib := llamatest.LibDir()
	if lib == "" {
		t.Skip("llama.cpp libraries not installed in lib/llama/cpu (run scripts/install-llama.sh cpu)")
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := model.WriteFile(path, model.Options{Seed: 1}); err != nil {
		t.Fatal(err)
	}
	so := remote.ServerOptions{}.Defaults()
	so.Secret = "serve-policy-secret-01"
	engineSrv, err := remote.NewServer(t.Context(), envs.Find, so)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(nil)
	url := "http://" + ts.Listener.Addr().String()
	h, closer, err := Mount(PolicyOptions{Model: path, Backend: players.Backend{LlamaLib: lib, Threads: 1}, Slots: 2, Context: 1024, MaxTokens: 32, APIKey: "policy-key-0123"}, url, so.Secret, engineSrv, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer closer.Close()
	ts.Config.Handler = h
	ts.Start()
	defer ts.Close()

	c := &remote.Client{BaseURL: url, Secret: so.Secret}
	info, err := c.Create(t.Context(), remote.CreateRequest{Env: "casino_v1"})
	if err != nil {
		t.Fatalf("engine route: %v", err)
	}
	body, _ := json.Marshal(map[string]any{"messages": []map[string]string{{"role": "user", "content": "Hi"}}, "max_tokens": 4})
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("X-Omar-Episode", info.ID)
	req.Header.Set("X-Omar-Seat", strconv.Itoa(0))
	req.Header.Set("X-Omar-Seat-Token", info.Seats[0].Token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("chat completion without the API key: got HTTP %d, want 401", resp.StatusCode)
	}
	req, _ = http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("X-Omar-Episode", info.ID)
	req.Header.Set("X-Omar-Seat", strconv.Itoa(0))
	req.Header.Set("X-Omar-Seat-Token", info.Seats[0].Token)
	req.Header.Set("Authorization", "Bearer policy-key-0123")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	data, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("chat completion: status %d: %s", resp.StatusCode, data)
	}
	req, _ = http.NewRequest(http.MethodGet, url+"/v1/omar/sessions", nil)
	req.Header.Set("Authorization", "Bearer "+so.Secret)
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		Sessions []struct {
			Key   string `json:"key"`
			Calls int    `json:"calls"`
		} `json:"sessions"`
	}
	err = json.NewDecoder(resp.Body).Decode(&list)
	resp.Body.Close()
	if err != nil || len(list.Sessions) != 1 || list.Sessions[0].Calls != 1 {
		t.Fatalf("sessions %+v (%v): want one session with one call", list.Sessions, err)
	}
	if want := "episode/" + info.ID + "/seat/0"; list.Sessions[0].Key != want {
		t.Errorf("session key %q, want %q", list.Sessions[0].Key, want)
	}
}
