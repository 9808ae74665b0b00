package engine

import (
	"context"
	"strconv"
	"testing"
)

// pingPong is a minimal two-seat game loop: every turn one seat is asked
// and its move is broadcast to both.
func pingPong(ctx context.Context, rt *Runtime, turns int) error {
	parse := func(s string) (any, error) { return s, nil }
	for i := range turns {
		seat := i % 2
		a, err := rt.Ask(ctx, Question{Seat: seat, Text: "move?", Parse: parse, Default: "pass"})
		if err != nil {
			return err
		}
		rt.Broadcast(Everyone(), seat, a.Text, nil)
	}
	return nil
}

// BenchmarkEngineEvents measures the runtime alone (no model): events per
// second for a two-seat game whose agents answer at once.
func BenchmarkEngineEvents(b *testing.B) {
	agent := AgentFunc(func(ctx context.Context, t Turn) (Action, error) {
		return Action{NotificationID: t.Notification.ID, Text: "move " + strconv.Itoa(len(t.View))}, nil
	})
	for _, turns := range []int{20, 200} {
		b.Run("turns="+strconv.Itoa(turns), func(b *testing.B) {
			b.ReportAllocs()
			events := 0
			for b.Loop() {
				rt, _ := NewRuntime(seats(2), []Agent{agent, agent}, DefaultOptions())
				if err := pingPong(context.Background(), rt, turns); err != nil {
					b.Fatal(err)
				}
				events += int(rt.Log().Len())
			}
			b.ReportMetric(float64(events)/b.Elapsed().Seconds(), "events/s")
		})
	}
}
