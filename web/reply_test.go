package web

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/selfplay"
)

// recordingBackend answers "ABSTAIN" and keeps every request.
type recordingBackend struct {
	mu   sync.Mutex
	reqs []inference.Request
}

func (b *recordingBackend) Generate(_ context.Context, reqs []inference.Request) ([]inference.Response, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.reqs = append(b.reqs, reqs...)
	out := make([]inference.Response, len(reqs))
	for i := range out {
		out[i] = inference.Response{Text: "ABSTAIN"}
	}
	return out, nil
}

func (*recordingBackend) Close() error { return nil }

// TestSeatReplySettings: a served seat reads the prompt its policy was
// trained on, so the reply settings a server is given — the
// legal-replies line among them — shape what it sends the model.
func TestSeatReplySettings(t *testing.T) {
	view := []engine.Event{
		{Seq: 1, Kind: engine.KindBriefing, Audience: engine.Audience{All: true}, Text: "You are p1."},
		{Seq: 2, Kind: engine.KindNotification, Audience: engine.Audience{All: true}, Seat: 0, NotificationID: "n1",
			Text: "Vote.", Legal: []string{"VOTE p2", "VOTE p3", "ABSTAIN"}},
	}
	for _, tc := range []struct {
		maxLegal  int
		wantLegal bool
	}{{0, true}, {-1, false}, {2, false}, {3, true}} {
		opts := SeatOptions{}.Defaults()
		opts.MaxLegal = tc.maxLegal
		b := &recordingBackend{}
		agents, err := NewModelAgents([]string{"m"}, []*selfplay.Player{{Label: "m", Backend: b}}, opts)
		if err != nil {
			t.Fatal(err)
		}
		a, _, err := agents.Agent("m", nil, engine.Seat{Index: 0}, 1, "ep")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Act(context.Background(), engine.Turn{Notification: engine.Notification{ID: "n1"}, View: view}); err != nil {
			t.Fatal(err)
		}
		if len(b.reqs) != 1 || len(b.reqs[0].Messages) == 0 {
			t.Fatalf("max_legal %d: got requests %+v, want one with messages", tc.maxLegal, b.reqs)
		}
		msgs := b.reqs[0].Messages
		got := strings.Contains(msgs[len(msgs)-1].Content, "Legal replies:")
		if got != tc.wantLegal {
			t.Errorf("max_legal %d: legal-replies line %v, want %v (prompt %q)", tc.maxLegal, got, tc.wantLegal, msgs[len(msgs)-1].Content)
		}
	}
}
