package sotopia

import (
	"embed"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"math/rand/v2"
	"os"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/omar-selfplay/omar/seeds"
)

//go:embed content/*.yaml
var embedded embed.FS

// Relationship is how well the two characters of a scenario know each
// other. It decides how much of the other's profile an agent sees (see
// Visible).
type Relationship string

// The relationships, from the least to the most familiar.
const (
	Stranger     Relationship = "stranger"
	KnowByName   Relationship = "know_by_name"
	Acquaintance Relationship = "acquaintance"
	Friend       Relationship = "friend"
	Romantic     Relationship = "romantic"
	Family       Relationship = "family"
)

// Relationships lists every relationship in order of familiarity.
var Relationships = []Relationship{Stranger, KnowByName, Acquaintance, Friend, Romantic, Family}

// Categories lists the scenario categories.
var Categories = []string{"cooperation", "competition", "negotiation", "persuasion", "exchange", "accommodation", "conflict"}

// Character is a character profile.
type Character struct {
	ID         string `yaml:"id" json:"id"`
	Name       string `yaml:"name" json:"name"`
	Age        int    `yaml:"age" json:"age"`
	Occupation string `yaml:"occupation" json:"occupation"`
	Gender     string `yaml:"gender" json:"gender"`
	// Pronouns like "she/her"; the first word is used in renderings.
	Pronouns      string   `yaml:"pronouns" json:"pronouns"`
	PublicInfo    string   `yaml:"public_info" json:"public_info"`
	Personality   string   `yaml:"personality" json:"personality"`
	Values        []string `yaml:"values" json:"values"`
	DecisionStyle string   `yaml:"decision_style" json:"decision_style"`
	// Secret is shown to its owner only, and to the judge.
	Secret string `yaml:"secret" json:"secret"`
}

// Constraints restrict which characters may play an agent of a scenario.
// Zero values do not restrict.
type Constraints struct {
	MinAge  int      `yaml:"min_age,omitempty" json:"min_age,omitempty"`
	MaxAge  int      `yaml:"max_age,omitempty" json:"max_age,omitempty"`
	Genders []string `yaml:"genders,omitempty" json:"genders,omitempty"`
}

// Allows reports whether c may play an agent with these constraints.
func (k Constraints) Allows(c Character) bool {
	if k.MinAge > 0 && c.Age < k.MinAge {
		return false
	}
	if k.MaxAge > 0 && c.Age > k.MaxAge {
		return false
	}
	return len(k.Genders) == 0 || slices.Contains(k.Genders, c.Gender)
}

// AgentSpec is one agent's part of a scenario.
type AgentSpec struct {
	// Role is a short public label ("tenant"); both agents see it.
	Role string `yaml:"role" json:"role"`
	// Goal is private: only this agent (and the judge) sees it.
	Goal        string      `yaml:"goal" json:"goal"`
	Constraints Constraints `yaml:"constraints,omitempty" json:"constraints"`
}

// Scenario is a social situation for two agents.
type Scenario struct {
	ID       string `yaml:"id" json:"id"`
	Category string `yaml:"category" json:"category"`
	// Hard marks the scenarios that need the most social skill (the
	// evaluation's "hard" subset).
	Hard         bool         `yaml:"hard,omitempty" json:"hard"`
	Relationship Relationship `yaml:"relationship" json:"relationship"`
	// Text is the public description both agents read.
	Text   string      `yaml:"scenario" json:"scenario"`
	Agents []AgentSpec `yaml:"agents" json:"agents"`
}

// Pair is an ordered pair of character ids: Pair[i] plays agent i.
type Pair [2]string

// Content is a validated set of characters and scenarios with the fixed
// character pairs of every scenario.
type Content struct {
	Characters []Character
	Scenarios  []Scenario
	// Pairs[i] are the character pairs of Scenarios[i].
	Pairs [][]Pair
	byID  map[string]int
}

// Character returns the character with id.
func (c *Content) Character(id string) (Character, bool) {
	i, ok := c.byID[id]
	if !ok {
		return Character{}, false
	}
	return c.Characters[i], true
}

// ScenarioIndex returns the index of the scenario with id, or -1.
func (c *Content) ScenarioIndex(id string) int {
	return slices.IndexFunc(c.Scenarios, func(s Scenario) bool { return s.ID == id })
}

// FileError is a problem in a content file, located by file, line and
// field path (like "scenarios[3].agents[1].goal").
type FileError struct {
	File  string
	Line  int
	Field string
	Msg   string
}

func (e *FileError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("sotopia: %s:%d: %s", e.File, e.Line, e.Msg)
	}
	return fmt.Sprintf("sotopia: %s:%d: %s: %s", e.File, e.Line, e.Field, e.Msg)
}

// contentFile is the top level of a content file: either list may be
// absent.
type contentFile struct {
	Characters []Character `yaml:"characters"`
	Scenarios  []Scenario  `yaml:"scenarios"`
}

// PairsPerScenario is the number of character pairs fixed per scenario
// (the original benchmark's 5).
const PairsPerScenario = 5

// pairingSeed fixes the character pairing; changing it changes every
// scenario's pairs, so it is part of the environment version.
const pairingSeed = 0x50707061697273 // "Sopairs"

// LoadEmbedded loads the content shipped with omar.
func LoadEmbedded() (*Content, error) {
	sub, err := fs.Sub(embedded, "content")
	if err != nil {
		return nil, fmt.Errorf("sotopia: embedded content: %w", err)
	}
	return Load(sub, "content")
}

// LoadDir loads every *.yaml file of a directory.
func LoadDir(dir string) (*Content, error) {
	return Load(os.DirFS(dir), dir)
}

// Load reads every *.yaml file of fsys (sorted by name), validates it and
// pairs characters to scenarios. prefix is prepended to file names in
// errors.
func Load(fsys fs.FS, prefix string) (*Content, error) {
	names, err := fs.Glob(fsys, "*.yaml")
	if err != nil {
		return nil, fmt.Errorf("sotopia: list %s: %w", prefix, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("sotopia: no *.yaml content files in %s", prefix)
	}
	slices.Sort(names)
	c := &Content{byID: map[string]int{}}
	type where struct {
		file string
		root *yaml.Node
		idx  int
	}
	var scenWhere []where
	seenScen := map[string]bool{}
	for _, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("sotopia: read %s: %w", path.Join(prefix, name), err)
		}
		file := path.Join(prefix, name)
		f, root, err := decodeFile(file, b)
		if err != nil {
			return nil, err
		}
		for i, ch := range f.Characters {
			field := fmt.Sprintf("characters[%d]", i)
			if err := ch.validate(); err != nil {
				return nil, locate(file, root, field, err)
			}
			if _, dup := c.byID[ch.ID]; dup {
				return nil, locate(file, root, field, &fieldErr{"id", "duplicate character id " + strconv.Quote(ch.ID)})
			}
			c.byID[ch.ID] = len(c.Characters)
			c.Characters = append(c.Characters, ch)
		}
		for i, s := range f.Scenarios {
			field := fmt.Sprintf("scenarios[%d]", i)
			if err := s.validate(); err != nil {
				return nil, locate(file, root, field, err)
			}
			if seenScen[s.ID] {
				return nil, locate(file, root, field, &fieldErr{"id", "duplicate scenario id " + strconv.Quote(s.ID)})
			}
			seenScen[s.ID] = true
			c.Scenarios = append(c.Scenarios, s)
			scenWhere = append(scenWhere, where{file, root, i})
		}
	}
	if len(c.Scenarios) == 0 {
		return nil, fmt.Errorf("sotopia: no scenarios in %s", prefix)
	}
	for i, s := range c.Scenarios {
		pairs := c.pair(s)
		if len(pairs) == 0 {
			w := scenWhere[i]
			return nil, locate(w.file, w.root, fmt.Sprintf("scenarios[%d]", w.idx),
				&fieldErr{"agents", "no two distinct characters satisfy the agents' constraints"})
		}
		c.Pairs = append(c.Pairs, pairs)
	}
	return c, nil
}

// pair picks up to PairsPerScenario ordered pairs of distinct eligible
// characters, from a shuffle seeded by the scenario id alone, so pairs do
// not change when other scenarios are added.
func (c *Content) pair(s Scenario) []Pair {
	var all []Pair
	for _, a := range c.Characters {
		if !s.Agents[0].Constraints.Allows(a) {
			continue
		}
		for _, b := range c.Characters {
			if a.ID != b.ID && s.Agents[1].Constraints.Allows(b) {
				all = append(all, Pair{a.ID, b.ID})
			}
		}
	}
	h := fnv.New64a()
	h.Write([]byte(s.ID))
	r := rand.New(rand.NewPCG(seeds.Derive(pairingSeed, h.Sum64()), pairingSeed))
	r.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	// Prefer pairs that do not repeat a character already used for this
	// scenario, so the 5 pairs show 10 different people when possible.
	var out []Pair
	used := map[string]bool{}
	for _, p := range all {
		if len(out) == PairsPerScenario {
			break
		}
		if !used[p[0]] && !used[p[1]] {
			out = append(out, p)
			used[p[0]], used[p[1]] = true, true
		}
	}
	for _, p := range all {
		if len(out) == PairsPerScenario {
			break
		}
		if !slices.Contains(out, p) {
			out = append(out, p)
		}
	}
	return out
}

// fieldErr is a validation error of one field, relative to the validated
// value.
type fieldErr struct {
	field string // path below the value, e.g. "agents[1].goal"
	msg   string
}

func (e *fieldErr) Error() string { return e.field + ": " + e.msg }

func required(field, v string) error {
	if strings.TrimSpace(v) == "" {
		return &fieldErr{field, "missing or empty"}
	}
	return nil
}

func (ch Character) validate() error {
	for _, f := range []struct{ name, v string }{
		{"id", ch.ID}, {"name", ch.Name}, {"occupation", ch.Occupation}, {"gender", ch.Gender},
		{"pronouns", ch.Pronouns}, {"public_info", ch.PublicInfo}, {"personality", ch.Personality},
		{"decision_style", ch.DecisionStyle}, {"secret", ch.Secret},
	} {
		if err := required(f.name, f.v); err != nil {
			return err
		}
	}
	if !validID(ch.ID) {
		return &fieldErr{"id", "must be lowercase letters, digits and dashes"}
	}
	if ch.Age < 1 || ch.Age > 120 {
		return &fieldErr{"age", fmt.Sprintf("%d is not an age (1..120)", ch.Age)}
	}
	if !strings.Contains(ch.Pronouns, "/") {
		return &fieldErr{"pronouns", fmt.Sprintf("%q is not like \"she/her\"", ch.Pronouns)}
	}
	if len(ch.Values) == 0 {
		return &fieldErr{"values", "missing or empty"}
	}
	for i, v := range ch.Values {
		if err := required(fmt.Sprintf("values[%d]", i), v); err != nil {
			return err
		}
	}
	return nil
}

func (s Scenario) validate() error {
	for _, f := range []struct{ name, v string }{{"id", s.ID}, {"category", s.Category}, {"relationship", string(s.Relationship)}, {"scenario", s.Text}} {
		if err := required(f.name, f.v); err != nil {
			return err
		}
	}
	if !validID(s.ID) {
		return &fieldErr{"id", "must be lowercase letters, digits and dashes"}
	}
	if !slices.Contains(Categories, s.Category) {
		return &fieldErr{"category", fmt.Sprintf("%q is not one of %s", s.Category, strings.Join(Categories, ", "))}
	}
	if !slices.Contains(Relationships, s.Relationship) {
		var names []string
		for _, r := range Relationships {
			names = append(names, string(r))
		}
		return &fieldErr{"relationship", fmt.Sprintf("%q is not one of %s", s.Relationship, strings.Join(names, ", "))}
	}
	if len(s.Agents) != 2 {
		return &fieldErr{"agents", fmt.Sprintf("has %d entries, want 2", len(s.Agents))}
	}
	for i, a := range s.Agents {
		p := fmt.Sprintf("agents[%d].", i)
		if err := required(p+"role", a.Role); err != nil {
			return err
		}
		if err := required(p+"goal", a.Goal); err != nil {
			return err
		}
		k := a.Constraints
		if k.MinAge < 0 || k.MaxAge < 0 || (k.MaxAge > 0 && k.MinAge > k.MaxAge) {
			return &fieldErr{p + "constraints", fmt.Sprintf("bad age range %d..%d", k.MinAge, k.MaxAge)}
		}
	}
	return nil
}

func validID(id string) bool {
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return false
		}
	}
	return id != ""
}

// decodeFile parses a content file strictly: every key is checked against
// the schema first (so an unknown or mistyped field is reported with its
// path and line), then the file is decoded with KnownFields as well.
func decodeFile(file string, b []byte) (contentFile, *yaml.Node, error) {
	var f contentFile
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return f, nil, yamlErr(file, err)
	}
	if len(doc.Content) == 0 {
		return f, nil, &FileError{File: file, Line: 1, Msg: "empty file"}
	}
	root := doc.Content[0]
	if err := checkNode(file, root, reflect.TypeFor[contentFile](), ""); err != nil {
		return f, nil, err
	}
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	if err := dec.Decode(&f); err != nil {
		return f, nil, yamlErr(file, err)
	}
	return f, root, nil
}

// yamlErr turns a yaml.v3 error ("yaml: line 3: …") into a FileError.
func yamlErr(file string, err error) error {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	line := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, tail, ok := strings.Cut(rest, ":"); ok {
			if v, err := strconv.Atoi(n); err == nil {
				line, msg = v, strings.TrimSpace(tail)
			}
		}
	}
	return &FileError{File: file, Line: line, Msg: msg}
}

// checkNode walks n against the yaml tags of t and reports the first
// unknown key or kind mismatch with its field path.
func checkNode(file string, n *yaml.Node, t reflect.Type, field string) error {
	bad := func(msg string) error { return &FileError{File: file, Line: n.Line, Field: field, Msg: msg} }
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return bad("want a mapping")
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			sf, ok := fieldByTag(t, k.Value)
			sub := k.Value
			if field != "" {
				sub = field + "." + k.Value
			}
			if !ok {
				return &FileError{File: file, Line: k.Line, Field: sub, Msg: fmt.Sprintf("unknown field (known: %s)", strings.Join(tags(t), ", "))}
			}
			if err := checkNode(file, v, sf.Type, sub); err != nil {
				return err
			}
		}
	case reflect.Slice:
		if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
			return nil
		}
		if n.Kind != yaml.SequenceNode {
			return bad("want a list")
		}
		for i, e := range n.Content {
			if err := checkNode(file, e, t.Elem(), fmt.Sprintf("%s[%d]", field, i)); err != nil {
				return err
			}
		}
	case reflect.String:
		if n.Kind != yaml.ScalarNode {
			return bad("want a string")
		}
	case reflect.Int:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
			return bad(fmt.Sprintf("want an integer, got %q", n.Value))
		}
	case reflect.Bool:
		if n.Kind != yaml.ScalarNode || n.Tag != "!!bool" {
			return bad(fmt.Sprintf("want true or false, got %q", n.Value))
		}
	}
	return nil
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == key && name != "" {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func tags(t reflect.Type) []string {
	var out []string
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name != "" {
			out = append(out, name)
		}
	}
	return out
}

// locate turns a validation error of the value at field into a FileError
// with the line of the offending node (or of the nearest enclosing one).
func locate(file string, root *yaml.Node, field string, err error) error {
	var fe *fieldErr
	if !errors.As(err, &fe) {
		return &FileError{File: file, Line: root.Line, Field: field, Msg: err.Error()}
	}
	full := field + "." + fe.field
	return &FileError{File: file, Line: lineOf(root, full), Field: full, Msg: fe.msg}
}

// lineOf finds the line of the node at a path like "scenarios[3].agents[1].goal",
// falling back to the deepest node that exists.
func lineOf(root *yaml.Node, p string) int {
	n, line := root, root.Line
	for part := range strings.SplitSeq(p, ".") {
		key, idx := part, -1
		if i := strings.IndexByte(part, '['); i >= 0 {
			key = part[:i]
			idx, _ = strconv.Atoi(strings.TrimSuffix(part[i+1:], "]"))
		}
		next := (*yaml.Node)(nil)
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					next, line = n.Content[i+1], n.Content[i].Line
					break
				}
			}
		}
		if next == nil {
			return line
		}
		n = next
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}
