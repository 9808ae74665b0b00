package calendar

import (
	"context"
	"os"
	"testing"

	"github.com/omar-selfplay/omar/engine/enginetest"
	"github.com/omar-selfplay/omar/games/negotiation"
)

func TestConformance(t *testing.T) {
	enginetest.Conformance(t, New())
}

func TestStrategicBeatsNaive(t *testing.T) {
	h, err := negotiation.PlayHeadToHead(context.Background(), New(), nil, "strategic", "naive", 200, 1)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		h.WriteTable(os.Stdout)
	}
	for r := range h.Roles {
		if s, n := h.Scores[0][r].Mean, h.Scores[1][r].Mean; s <= n {
			t.Errorf("%s: strategic mean reward %.3f, naive %.3f; want strategic > naive", h.Roles[r], s, n)
		}
	}
}
