package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

func seats(n int) []Seat {
	s := make([]Seat, n)
	for i := range s {
		s[i] = Seat{Index: i, Name: "s" + strconv.Itoa(i)}
	}
	return s
}

// scriptAgent replies with its lines in order; "!timeout" and "!stale"
// simulate a timeout and a stale reply.
func scriptAgent(lines ...string) Agent {
	i := 0
	return AgentFunc(func(ctx context.Context, t Turn) (Action, error) {
		l := lines[min(i, len(lines)-1)]
		i++
		switch l {
		case "!timeout":
			return Action{}, fmt.Errorf("slow: %w", ErrTimeout)
		case "!stale":
			return Action{NotificationID: "n0", Text: "1"}, nil
		}
		return Action{NotificationID: t.Notification.ID, Text: l}, nil
	})
}

func parseInt(s string) (any, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return nil, fmt.Errorf("want a number")
	}
	return n, nil
}

func kinds(events []Event) string {
	var k []string
	for _, e := range events {
		k = append(k, string(e.Kind))
	}
	return strings.Join(k, " ")
}

func TestAsk(t *testing.T) {
	for _, tc := range []struct {
		name      string
		lines     []string
		retries   int
		want      Answer
		wantKinds string
	}{
		{"valid", []string{"7"}, 2, Answer{Text: "7", Move: 7, Attempts: 1}, "notification action ack"},
		{"invalid then valid", []string{"x", "8"}, 2, Answer{Text: "8", Move: 8, Attempts: 2, Invalid: 1},
			"notification action validation_error notification action ack"},
		{"retries exhausted", []string{"x", "y", "z"}, 1, Answer{Text: "0", Move: 0, Attempts: 2, Invalid: 2, Defaulted: true},
			"notification action validation_error notification action validation_error default"},
		{"stale", []string{"!stale", "9"}, 2, Answer{Text: "9", Move: 9, Attempts: 2, Invalid: 1},
			"notification action validation_error notification action ack"},
		{"timeout", []string{"!timeout"}, 2, Answer{Text: "0", Move: 0, Defaulted: true}, "notification default"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt, err := NewRuntime(seats(1), []Agent{scriptAgent(tc.lines...)}, Options{MaxRetries: tc.retries})
			if err != nil {
				t.Fatal(err)
			}
			got, err := rt.Ask(context.Background(), Question{Seat: 0, Text: "number?", Parse: parseInt, Default: "0"})
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %+v, want %+v", got, tc.want)
			}
			if k := kinds(rt.Log().All()); k != tc.wantKinds {
				t.Errorf("got events %q, want %q", k, tc.wantKinds)
			}
		})
	}
}

func TestAskTimeoutFromDeadline(t *testing.T) {
	slow := AgentFunc(func(ctx context.Context, t Turn) (Action, error) {
		<-ctx.Done()
		return Action{}, ctx.Err()
	})
	rt, _ := NewRuntime(seats(1), []Agent{slow}, Options{Timeout: 5 * time.Millisecond})
	a, err := rt.Ask(context.Background(), Question{Seat: 0, Parse: parseInt, Default: "3"})
	if err != nil || !a.Defaulted || a.Move != 3 {
		t.Fatalf("got %+v, %v; want the default 3", a, err)
	}
}

func TestAskCancelledIsAnError(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	agent := AgentFunc(func(c context.Context, t Turn) (Action, error) {
		cancel()
		return Action{}, c.Err()
	})
	rt, _ := NewRuntime(seats(1), []Agent{agent}, DefaultOptions())
	if _, err := rt.Ask(ctx, Question{Seat: 0, Parse: parseInt, Default: "0"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
}

func TestAgentFailureIsAnError(t *testing.T) {
	boom := errors.New("backend crashed")
	agent := AgentFunc(func(context.Context, Turn) (Action, error) { return Action{}, boom })
	rt, _ := NewRuntime(seats(1), []Agent{agent}, DefaultOptions())
	if _, err := rt.Ask(context.Background(), Question{Seat: 0, Parse: parseInt, Default: "0"}); !errors.Is(err, boom) {
		t.Fatalf("got %v, want the agent's error", err)
	}
}

// TestAskAllIsSimultaneous checks that every seat is notified before any
// agent runs, and that no seat sees another's notification or action.
func TestAskAllIsSimultaneous(t *testing.T) {
	const n = 4
	var rt *Runtime
	var started atomic.Int32
	agents := make([]Agent, n)
	for i := range agents {
		agents[i] = AgentFunc(func(ctx context.Context, t Turn) (Action, error) {
			// Every notification is already in the log.
			if got := rt.Log().Len(); got < n {
				return Action{}, fmt.Errorf("seat %d acted when only %d events existed", i, got)
			}
			if t.Notification.Attempt == 1 {
				started.Add(1)
				for started.Load() < n { // all agents of round 1 run at once
					time.Sleep(time.Millisecond)
				}
			}
			for _, e := range t.View {
				if e.Seat != i {
					return Action{}, fmt.Errorf("seat %d saw an event of seat %d", i, e.Seat)
				}
			}
			reply := strconv.Itoa(i * 10)
			if i == 2 && t.Notification.Attempt == 1 {
				reply = "oops"
			}
			return Action{NotificationID: t.Notification.ID, Text: reply}, nil
		})
	}
	rt, _ = NewRuntime(seats(n), agents, DefaultOptions())
	qs := make([]Question, n)
	for i := range qs {
		qs[i] = Question{Seat: n - 1 - i, Parse: parseInt, Default: "0"} // order need not be by seat
	}
	ans, err := rt.AskAll(context.Background(), qs)
	if err != nil {
		t.Fatal(err)
	}
	for i, a := range ans {
		if a.Seat != n-1-i || a.Move != a.Seat*10 {
			t.Errorf("answer %d: got %+v", i, a)
		}
	}
	if ans[1].Invalid != 1 || ans[1].Attempts != 2 {
		t.Errorf("seat 2: got %+v, want one invalid reply and a retry", ans[1])
	}
	// Round 1: four notifications, then replies in question order.
	got := kinds(rt.Log().All())
	want := "notification notification notification notification action ack action validation_error action ack action ack notification action ack"
	if got != want {
		t.Errorf("got events %q\nwant %q", got, want)
	}
}

func TestNewRuntimeErrors(t *testing.T) {
	a := scriptAgent("1")
	for _, tc := range []struct {
		name   string
		seats  []Seat
		agents []Agent
		opts   Options
	}{
		{"too few agents", seats(2), []Agent{a}, DefaultOptions()},
		{"nil agent", seats(1), []Agent{nil}, DefaultOptions()},
		{"bad index", []Seat{{Index: 3}}, []Agent{a}, DefaultOptions()},
		{"negative retries", seats(1), []Agent{a}, Options{MaxRetries: -1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewRuntime(tc.seats, tc.agents, tc.opts); err == nil {
				t.Errorf("got no error")
			}
		})
	}
	rt, _ := NewRuntime(seats(1), []Agent{a}, DefaultOptions())
	for _, qs := range [][]Question{
		{{Seat: 5, Parse: parseInt}},
		{{Seat: 0}},
		{{Seat: 0, Parse: parseInt}, {Seat: 0, Parse: parseInt}},
	} {
		if _, err := rt.AskAll(context.Background(), qs); err == nil {
			t.Errorf("AskAll(%+v): got no error", qs)
		}
	}
}

func TestLogAudiences(t *testing.T) {
	s := seats(4)
	s[1].Team, s[3].Team = "wolves", "wolves"
	l := NewLog(s)
	l.Append(Event{Kind: KindObservation, Audience: Everyone(), Text: "public"})
	l.Append(Event{Kind: KindObservation, Audience: TeamAudience("wolves"), Text: "team"})
	l.Append(Event{Kind: KindObservation, Audience: Only(2), Text: "private"})
	l.Append(Event{Kind: KindObservation, Text: "record only"})
	for _, tc := range []struct {
		seat int
		want []string
	}{
		{0, []string{"public"}},
		{1, []string{"public", "team"}},
		{2, []string{"public", "private"}},
		{3, []string{"public", "team"}},
		{9, nil},
	} {
		var got []string
		for _, e := range l.View(tc.seat) {
			got = append(got, e.Text)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("seat %d: got %v, want %v", tc.seat, got, tc.want)
		}
	}
	if a := l.All()[1].Audience; !slices.Equal(a.Seats, []int{1, 3}) {
		t.Errorf("team audience resolved to %v, want [1 3]", a.Seats)
	}
	if got := l.After(1, 1); len(got) != 1 || got[0].Seq != 2 {
		t.Errorf("After(1, 1) = %+v, want event 2", got)
	}
	if got := l.After(-1, 2); len(got) != 2 {
		t.Errorf("After(-1, 2) = %d events, want 2", len(got))
	}
}

func TestLogWait(t *testing.T) {
	l := NewLog(seats(2))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if _, _, err := l.Wait(ctx, 0, 0); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an empty log: got %v, want a deadline", err)
	}
	done := make(chan []Event)
	go func() {
		ev, _, _ := l.Wait(context.Background(), 1, 0)
		done <- ev
	}()
	l.Append(Event{Audience: Only(0), Text: "not for 1"})
	l.Append(Event{Audience: Only(1), Text: "for 1"})
	if ev := <-done; len(ev) != 1 || ev[0].Text != "for 1" {
		t.Fatalf("got %+v, want the event for seat 1", ev)
	}
	l.Close()
	ev, closed, err := l.Wait(context.Background(), 1, 2)
	if len(ev) != 0 || !closed || err != nil {
		t.Fatalf("after Close: got %v, %v, %v; want no events, closed", ev, closed, err)
	}
}

func TestDecodeParams(t *testing.T) {
	var p struct {
		Rounds int `json:"rounds"`
	}
	p.Rounds = 5
	if err := DecodeParams(nil, &p); err != nil || p.Rounds != 5 {
		t.Fatalf("nil params changed the defaults: %v %v", p, err)
	}
	if err := DecodeParams(Params{"rounds": 7}, &p); err != nil || p.Rounds != 7 {
		t.Fatalf("got %v %v, want rounds 7", p, err)
	}
	if err := DecodeParams(Params{"roundz": 7}, &p); err == nil || !strings.Contains(err.Error(), "roundz") {
		t.Fatalf("unknown key: got %v, want an error naming it", err)
	}
}

func TestSplitID(t *testing.T) {
	for _, tc := range []struct {
		id   string
		name string
		v    int
	}{{"dealornodeal_v1", "dealornodeal", 1}, {"werewolf_v12", "werewolf", 12}, {"plain", "plain", 0}, {"x_vy", "x_vy", 0}} {
		if n, v := SplitID(tc.id); n != tc.name || v != tc.v {
			t.Errorf("SplitID(%q) = %q, %d; want %q, %d", tc.id, n, v, tc.name, tc.v)
		}
	}
}

// preparingAgent records its Prepare calls and, in Act, how many Prepares
// of the move had happened.
type preparingAgent struct {
	prepared *atomic.Int32
	seen     int32
	calls    int
}

func (p *preparingAgent) Prepare(Turn) { p.prepared.Add(1); p.calls++ }

func (p *preparingAgent) Act(_ context.Context, t Turn) (Action, error) {
	p.seen = p.prepared.Load()
	return Action{NotificationID: t.Notification.ID, Text: "1"}, nil
}

// TestPrepareBeforeAct: every Preparer of a simultaneous move is prepared,
// once, before any of the move's agents acts; other agents are not.
func TestPrepareBeforeAct(t *testing.T) {
	const n = 4
	var prepared atomic.Int32
	agents := make([]Agent, n)
	ps := make([]*preparingAgent, n-1)
	for i := range ps {
		ps[i] = &preparingAgent{prepared: &prepared}
		agents[i] = ps[i]
	}
	agents[n-1] = scriptAgent("1")
	rt, _ := NewRuntime(seats(n), agents, DefaultOptions())
	qs := make([]Question, n)
	for i := range qs {
		qs[i] = Question{Seat: i, Parse: parseInt, Default: "0"}
	}
	if _, err := rt.AskAll(context.Background(), qs); err != nil {
		t.Fatal(err)
	}
	for i, p := range ps {
		if p.calls != 1 || p.seen != n-1 {
			t.Errorf("seat %d: %d Prepare calls, acted after %d of the move's %d", i, p.calls, p.seen, n-1)
		}
	}
}
