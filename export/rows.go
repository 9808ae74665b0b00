package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"slices"

	"github.com/omar-selfplay/omar/engine"
	"github.com/omar-selfplay/omar/inference"
	"github.com/omar-selfplay/omar/seeds"
	"github.com/omar-selfplay/omar/selfplay"
)

// The Parquet row types. Their tags are the schema (docs/datasets.md).
//
// Strings are never null: an empty string stands for a field the JSON
// omits, as it does there. Null appears only where absent and empty
// differ: the JSON-text columns (params, scenario, terms, metrics, an
// event's data) are null when the record has no value, and turn_flags is
// null when no turn guard ran (a list of empty lists when one ran and
// flagged nothing). JSON-text columns are plain strings rather than
// Parquet's JSON logical type, which not every reader maps to a string.

// TrajectoryRow is one row of a trajectories Parquet file: one
// selfplay.Trajectory, token streams as lists.
type TrajectoryRow struct {
	Env           string    `parquet:"env,dict"`
	Episode       int64     `parquet:"episode"`
	Seed          uint64    `parquet:"seed"`
	Scenario      string    `parquet:"scenario,dict"`
	Seat          int32     `parquet:"seat"`
	SeatName      string    `parquet:"seat_name,dict"`
	Role          string    `parquet:"role,dict"`
	Team          string    `parquet:"team,dict"`
	Agent         string    `parquet:"agent,dict"`
	Segment       int32     `parquet:"segment"`
	Tokens        []int32   `parquet:"tokens,list"`
	Mask          []bool    `parquet:"mask,list"`
	Logprobs      []float32 `parquet:"logprobs,list"`
	RawLogprobs   []float32 `parquet:"raw_logprobs,list"`
	TurnEnds      []int32   `parquet:"turn_ends,list"`
	TurnRewards   []float64 `parquet:"turn_rewards,list"`
	Reward        float64   `parquet:"reward"`
	ShapedTurns   bool      `parquet:"shaped_turns"`
	InferAccuracy *float64  `parquet:"infer_accuracy,optional"`
	// The other theory-of-mind trace scores (selfplay.ToMScores).
	InferExact         *float64   `parquet:"infer_exact,optional"`
	AnticipateAccuracy *float64   `parquet:"anticipate_accuracy,optional"`
	AnticipateExact    *float64   `parquet:"anticipate_exact,optional"`
	PolicyVersions     []int32    `parquet:"policy_versions,list"`
	TurnFlags          [][]string `parquet:"turn_flags,optional,list" parquet-element:",list"`
	// Allowed are the recorded grammar sets (selfplay.Trajectory.Allowed),
	// by increasing position.
	Allowed []AllowedRow `parquet:"allowed,list"`
}

// AllowedRow is the grammar's set at one position of a TrajectoryRow.
type AllowedRow struct {
	Pos     int32   `parquet:"pos"`
	IDs     []int32 `parquet:"ids,list"`
	LogMass float32 `parquet:"log_mass"`
}

// EpisodeRow is one row of an episodes Parquet file: one engine.Record.
type EpisodeRow struct {
	// Index is the record's position in the input (0-based): records
	// carry no index of their own.
	Index      int64      `parquet:"index"`
	Env        string     `parquet:"env,dict"`
	EnvName    string     `parquet:"env_name,dict"`
	EnvVersion int32      `parquet:"env_version"`
	Params     *string    `parquet:"params,optional"`
	Seed       uint64     `parquet:"seed"`
	Seats      []SeatRow  `parquet:"seats,list"`
	Scenario   *string    `parquet:"scenario,optional"`
	Events     []EventRow `parquet:"events,list"`
	Rewards    []float64  `parquet:"rewards,list"`
	Result     string     `parquet:"result,dict"`
	Terms      *string    `parquet:"terms,optional"`
	Metrics    *string    `parquet:"metrics,optional"`
}

// SeatRow is a seat of an EpisodeRow.
type SeatRow struct {
	Index int32  `parquet:"index"`
	Name  string `parquet:"name"`
	Role  string `parquet:"role"`
	Team  string `parquet:"team"`
	Agent string `parquet:"agent"`
}

// EventRow is an event of an EpisodeRow. The audience is flattened into
// three columns; data, whose shape depends on the game and the kind of
// event, is JSON text.
type EventRow struct {
	Seq            int64    `parquet:"seq"`
	Kind           string   `parquet:"kind,dict"`
	AudienceAll    bool     `parquet:"audience_all"`
	AudienceSeats  []int32  `parquet:"audience_seats,list"`
	AudienceTeam   string   `parquet:"audience_team"`
	Seat           int32    `parquet:"seat"`
	NotificationID string   `parquet:"notification_id"`
	Text           string   `parquet:"text"`
	Legal          []string `parquet:"legal,list"`
	Grammar        string   `parquet:"grammar"`
	Data           *string  `parquet:"data,optional"`
}

// NewTrajectoryRow converts a trajectory to its row. It fails only on
// numbers that do not fit the schema's 32-bit columns.
func NewTrajectoryRow(t *selfplay.Trajectory) (TrajectoryRow, error) {
	row := TrajectoryRow{
		Env: t.Env, Episode: int64(t.Episode), Seed: uint64(t.Seed), Scenario: t.Scenario,
		SeatName: t.SeatName, Role: t.Role, Team: t.Team, Agent: t.Agent,
		Tokens: t.Tokens, Mask: t.Mask, Logprobs: t.Logprobs, RawLogprobs: t.RawLogprobs,
		TurnRewards: t.TurnRewards, Reward: t.Reward, ShapedTurns: t.ShapedTurns, TurnFlags: t.TurnFlags,
	}
	row.InferAccuracy, row.InferExact = score(t.InferAccuracy), score(t.InferExact)
	row.AnticipateAccuracy, row.AnticipateExact = score(t.AnticipateAccuracy), score(t.AnticipateExact)
	var err error
	if row.Seat, err = int32Of("seat", t.Seat); err != nil {
		return row, err
	}
	if row.Segment, err = int32Of("segment", t.Segment); err != nil {
		return row, err
	}
	if row.TurnEnds, err = int32sOf("turn_ends", t.TurnEnds); err != nil {
		return row, err
	}
	if row.PolicyVersions, err = int32sOf("policy_versions", t.PolicyVersions); err != nil {
		return row, err
	}
	for _, i := range slices.Sorted(maps.Keys(t.Allowed)) {
		a := t.Allowed[i]
		row.Allowed = append(row.Allowed, AllowedRow{Pos: int32(i), IDs: a.IDs, LogMass: a.LogMass})
	}
	if t.TurnFlags != nil {
		// A flagged-nothing turn is an empty list, never null: copy so
		// that nil inner slices of the input do not leak through.
		row.TurnFlags = make([][]string, len(t.TurnFlags))
		for k, f := range t.TurnFlags {
			row.TurnFlags[k] = append([]string{}, f...)
		}
	}
	return row, nil
}

// Trajectory converts a row back to the trajectory it was made from.
func (r *TrajectoryRow) Trajectory() selfplay.Trajectory {
	t := selfplay.Trajectory{
		Env: r.Env, Episode: int(r.Episode), Seed: seeds.JSON(r.Seed), Scenario: r.Scenario,
		Seat: int(r.Seat), SeatName: r.SeatName, Role: r.Role, Team: r.Team, Agent: r.Agent,
		Segment: int(r.Segment),
		Tokens:  nonNil(r.Tokens), Mask: selfplay.Mask(nonNil(r.Mask)),
		Logprobs: nonNil(r.Logprobs), RawLogprobs: nonNil(r.RawLogprobs),
		TurnEnds: ints(r.TurnEnds), TurnRewards: nonNil(r.TurnRewards), Reward: r.Reward,
		ShapedTurns: r.ShapedTurns, PolicyVersions: ints(r.PolicyVersions),
	}
	t.InferAccuracy, t.InferExact = score(r.InferAccuracy), score(r.InferExact)
	t.AnticipateAccuracy, t.AnticipateExact = score(r.AnticipateAccuracy), score(r.AnticipateExact)
	for _, a := range r.Allowed {
		if t.Allowed == nil {
			t.Allowed = map[int]inference.AllowedTokens{}
		}
		t.Allowed[int(a.Pos)] = inference.AllowedTokens{IDs: nonNil(a.IDs), LogMass: a.LogMass}
	}
	if r.TurnFlags != nil {
		t.TurnFlags = make([][]string, len(r.TurnFlags))
		for k, f := range r.TurnFlags {
			t.TurnFlags[k] = nonNil(f)
		}
	}
	return t
}

// NewEpisodeRow converts the index-th record of an input to its row.
func NewEpisodeRow(index int, rec *engine.Record) (EpisodeRow, error) {
	row := EpisodeRow{
		Index: int64(index), Env: rec.Env, EnvName: rec.EnvName, Seed: rec.Seed,
		Rewards: rec.Outcome.Rewards, Result: rec.Outcome.Result,
		Seats: make([]SeatRow, len(rec.Seats)), Events: make([]EventRow, len(rec.Events)),
	}
	var err error
	if row.EnvVersion, err = int32Of("env_version", rec.EnvVersion); err != nil {
		return row, err
	}
	if rec.Params != nil {
		if row.Params, err = jsonText("params", rec.Params); err != nil {
			return row, err
		}
	}
	if row.Scenario, err = jsonText("scenario", rec.Scenario); err != nil {
		return row, err
	}
	if row.Terms, err = jsonText("terms", rec.Outcome.Terms); err != nil {
		return row, err
	}
	if rec.Outcome.Metrics != nil {
		if row.Metrics, err = jsonText("metrics", rec.Outcome.Metrics); err != nil {
			return row, err
		}
	}
	for i, s := range rec.Seats {
		idx, err := int32Of("seat index", s.Index)
		if err != nil {
			return row, err
		}
		row.Seats[i] = SeatRow{Index: idx, Name: s.Name, Role: s.Role, Team: s.Team, Agent: s.Agent}
	}
	for i, e := range rec.Events {
		er := EventRow{
			Seq: e.Seq, Kind: string(e.Kind), AudienceAll: e.Audience.All, AudienceTeam: e.Audience.Team,
			NotificationID: e.NotificationID, Text: e.Text, Legal: e.Legal, Grammar: e.Grammar,
		}
		if er.Seat, err = int32Of("event seat", e.Seat); err != nil {
			return row, err
		}
		if er.AudienceSeats, err = int32sOf("audience seats", e.Audience.Seats); err != nil {
			return row, err
		}
		if er.Data, err = jsonText(fmt.Sprintf("event %d data", e.Seq), e.Data); err != nil {
			return row, err
		}
		row.Events[i] = er
	}
	return row, nil
}

// Record converts a row back to the record it was made from. Untyped
// values (params, scenario, terms, event data) come back as encoding/json
// decodes them with UseNumber, which is how DecodeRecord reads them.
func (r *EpisodeRow) Record() (engine.Record, error) {
	rec := engine.Record{
		Env: r.Env, EnvName: r.EnvName, EnvVersion: int(r.EnvVersion), Seed: r.Seed,
		Seats:   make([]engine.SeatRecord, len(r.Seats)),
		Events:  make([]engine.Event, len(r.Events)),
		Outcome: engine.Outcome{Rewards: nonNil(r.Rewards), Result: r.Result},
	}
	if r.Params != nil {
		if err := fromJSONText("params", *r.Params, &rec.Params); err != nil {
			return rec, err
		}
	}
	if err := fromJSONTextAny("scenario", r.Scenario, &rec.Scenario); err != nil {
		return rec, err
	}
	if err := fromJSONTextAny("terms", r.Terms, &rec.Outcome.Terms); err != nil {
		return rec, err
	}
	if r.Metrics != nil {
		if err := fromJSONText("metrics", *r.Metrics, &rec.Outcome.Metrics); err != nil {
			return rec, err
		}
	}
	for i, s := range r.Seats {
		rec.Seats[i] = engine.SeatRecord{Seat: engine.Seat{Index: int(s.Index), Name: s.Name, Role: s.Role, Team: s.Team}, Agent: s.Agent}
	}
	for i, e := range r.Events {
		ev := engine.Event{
			Seq: e.Seq, Kind: engine.Kind(e.Kind),
			Audience: engine.Audience{All: e.AudienceAll, Seats: ints(e.AudienceSeats), Team: e.AudienceTeam},
			Seat:     int(e.Seat), NotificationID: e.NotificationID, Text: e.Text, Legal: e.Legal, Grammar: e.Grammar,
		}
		if len(ev.Audience.Seats) == 0 {
			ev.Audience.Seats = nil
		}
		if len(ev.Legal) == 0 {
			ev.Legal = nil
		}
		if err := fromJSONTextAny(fmt.Sprintf("event %d data", e.Seq), e.Data, &ev.Data); err != nil {
			return rec, err
		}
		rec.Events[i] = ev
	}
	return rec, nil
}

// jsonText encodes v as JSON text, nil for a nil v.
func jsonText(what string, v any) (*string, error) {
	if v == nil {
		return nil, nil
	}
	b, err := marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	s := string(b)
	return &s, nil
}

// marshal is json.Marshal without HTML escaping (the text is read by
// people and tools, not embedded in HTML) and without the newline.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

func fromJSONText(what, s string, v any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(s)))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("export: %s: %w", what, err)
	}
	return nil
}

func fromJSONTextAny(what string, s *string, v *any) error {
	if s == nil {
		*v = nil
		return nil
	}
	return fromJSONText(what, *s, v)
}

func int32Of(what string, v int) (int32, error) {
	if v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("%s %d does not fit the schema's int32", what, v)
	}
	return int32(v), nil
}

func int32sOf(what string, vs []int) ([]int32, error) {
	if vs == nil {
		return nil, nil
	}
	out := make([]int32, len(vs))
	for i, v := range vs {
		x, err := int32Of(what, v)
		if err != nil {
			return nil, err
		}
		out[i] = x
	}
	return out, nil
}

func ints(vs []int32) []int {
	out := make([]int, len(vs))
	for i, v := range vs {
		out[i] = int(v)
	}
	return out
}

// nonNil returns vs, or an empty slice for nil: the JSONL writers encode
// empty lists as [], and a reader gets back what was written.
func nonNil[T any](vs []T) []T {
	if vs == nil {
		return []T{}
	}
	return vs
}

// score copies an optional score, so a row and its trajectory share no
// memory.
func score(p *float64) *float64 {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}
