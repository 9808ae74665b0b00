package gbnf

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"
)

// Type is an element type, numbered as llama.cpp's llama_gretype.
type Type uint32

const (
	End          Type = iota // end of a rule definition
	Alt                      // start of an alternate definition of the rule
	RuleRef                  // non-terminal: Value is the rule id
	Char                     // terminal: Value is a code point
	CharNot                  // inverse char(s) ([^a], [^a-b], [^abc])
	CharRngUpper             // upper bound of the range started by the previous element
	CharAlt                  // another char of the set started by the previous element
	CharAny                  // any character (.)
	Token                    // a token id (<[id]> or <text>)
	TokenNot                 // any token but one (!<[id]>)
)

// Element is one element of a rule, as llama_grammar_element.
type Element struct {
	Type  Type
	Value uint32
}

// Grammar is a parsed grammar: Rules[id] is the rule with that symbol id,
// its alternates separated by Alt and closed by End.
type Grammar struct {
	Rules [][]Element
	// Symbols maps rule names (generated ones included) to ids.
	Symbols map[string]uint32
	// Elements is the total number of elements over all rules.
	Elements int
	// Tokens reports whether the grammar names tokens by text (<text>),
	// which only a vocabulary can resolve.
	Tokens bool
}

// SyntaxError is a grammar llama.cpp's parser would refuse. Offset is the
// byte offset in the grammar text where the parser stopped.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("gbnf: %s at byte %d", e.Msg, e.Offset)
}

// ErrLimit is wrapped by every error for a grammar beyond one of the Limits.
var ErrLimit = errors.New("gbnf: grammar beyond a limit")

// maxRepetition is llama.cpp's MAX_REPETITION_THRESHOLD.
const maxRepetition = 2000

// parser mirrors llama_grammar_parser over a Go string; at(i) is 0 past
// the end, as the C string's terminator.
type parser struct {
	src      string
	lim      Limits
	symbols  map[string]uint32
	rules    [][]Element
	elements int
	tokens   bool
	depth    int
}

func (p *parser) at(i int) byte {
	if i < len(p.src) {
		return p.src[i]
	}
	return 0
}

func (p *parser) fail(pos int, format string, args ...any) error {
	return &SyntaxError{Offset: pos, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) limit(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrLimit, fmt.Sprintf(format, args...))
}

// Parse parses src as llama.cpp would, within lim's MaxBytes, MaxNesting,
// MaxRules and MaxElements (which are checked while parsing, before the
// rewriting of repetitions can grow anything).
func Parse(src string, lim Limits) (*Grammar, error) {
	if err := lim.Validate(); err != nil {
		return nil, err
	}
	if len(src) > lim.MaxBytes {
		return nil, fmt.Errorf("%w: %d bytes, limit %d", ErrLimit, len(src), lim.MaxBytes)
	}
	for i := 0; i < len(src); i++ {
		if src[i] == 0 {
			// C would see the text cut here: refuse rather than check a
			// different grammar from the one llama.cpp would parse.
			return nil, &SyntaxError{Offset: i, Msg: "NUL byte in grammar"}
		}
	}
	p := &parser{src: src, lim: lim, symbols: map[string]uint32{}}
	pos := p.space(0, true)
	for pos < len(src) {
		var err error
		if pos, err = p.rule(pos); err != nil {
			return nil, err
		}
	}
	for id, r := range p.rules {
		if len(r) == 0 {
			return nil, p.fail(len(src), "undefined rule %s", p.name(uint32(id)))
		}
		for _, e := range r {
			if e.Type == RuleRef && (int(e.Value) >= len(p.rules) || len(p.rules[e.Value]) == 0) {
				return nil, p.fail(len(src), "undefined rule identifier %q", p.name(e.Value))
			}
		}
	}
	if len(p.rules) == 0 {
		return nil, p.fail(len(src), "empty grammar")
	}
	return &Grammar{Rules: p.rules, Symbols: p.symbols, Elements: p.elements, Tokens: p.tokens}, nil
}

// name is a symbol id's name, for errors.
func (p *parser) name(id uint32) string {
	for n, i := range p.symbols {
		if i == id {
			return n
		}
	}
	return "#" + strconv.Itoa(int(id))
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isWordChar(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c == '-' || isDigit(c)
}

func (p *parser) space(pos int, newlineOK bool) int {
	for {
		c := p.at(pos)
		switch {
		case c == ' ' || c == '\t':
			pos++
		case c == '#':
			for p.at(pos) != 0 && p.at(pos) != '\r' && p.at(pos) != '\n' {
				pos++
			}
		case newlineOK && (c == '\r' || c == '\n'):
			pos++
		default:
			return pos
		}
	}
}

func (p *parser) nameEnd(pos int) (int, error) {
	end := pos
	for isWordChar(p.at(end)) {
		end++
	}
	if end == pos {
		return 0, p.fail(pos, "expecting name")
	}
	return end, nil
}

func (p *parser) intEnd(pos int) (int, error) {
	end := pos
	for isDigit(p.at(end)) {
		end++
	}
	if end == pos {
		return 0, p.fail(pos, "expecting integer")
	}
	return end, nil
}

// symbol is get_symbol_id: the id of a name, assigned on first mention.
func (p *parser) symbol(name string) uint32 {
	if id, ok := p.symbols[name]; ok {
		return id
	}
	id := uint32(len(p.symbols))
	p.symbols[name] = id
	return id
}

// generate is generate_symbol_id: a fresh id named base_N (which, as in
// llama.cpp, replaces a user rule of that name in the table).
func (p *parser) generate(base string) uint32 {
	id := uint32(len(p.symbols))
	p.symbols[base+"_"+strconv.Itoa(int(id))] = id
	return id
}

func (p *parser) addRule(id uint32, r []Element) error {
	if int(id) >= p.lim.MaxRules {
		return p.limit("more than %d rules (groups and repetitions count as rules)", p.lim.MaxRules)
	}
	for len(p.rules) <= int(id) {
		p.rules = append(p.rules, nil)
	}
	p.elements += len(r) - len(p.rules[id])
	p.rules[id] = r
	return nil
}

// grow accounts for n more elements about to be added to a rule.
func (p *parser) grow(n int) error {
	if p.elements+n > p.lim.MaxElements {
		return p.limit("more than %d grammar elements once repetitions are expanded", p.lim.MaxElements)
	}
	return nil
}

func (p *parser) rule(pos int) (int, error) {
	end, err := p.nameEnd(pos)
	if err != nil {
		return 0, err
	}
	name := p.src[pos:end]
	pos = p.space(end, false)
	id := p.symbol(name)
	if p.at(pos) != ':' || p.at(pos+1) != ':' || p.at(pos+2) != '=' {
		return 0, p.fail(pos, "expecting ::=")
	}
	pos = p.space(pos+3, true)
	if pos, err = p.alternates(pos, name, id, false); err != nil {
		return 0, err
	}
	switch p.at(pos) {
	case '\r':
		pos++
		if p.at(pos) == '\n' {
			pos++
		}
	case '\n':
		pos++
	case 0:
	default:
		return 0, p.fail(pos, "expecting newline or end")
	}
	return p.space(pos, true), nil
}

func (p *parser) alternates(pos int, name string, id uint32, nested bool) (int, error) {
	var r []Element
	var err error
	if pos, err = p.sequence(pos, name, &r, nested); err != nil {
		return 0, err
	}
	for p.at(pos) == '|' {
		r = append(r, Element{Alt, 0})
		pos = p.space(pos+1, true)
		if pos, err = p.sequence(pos, name, &r, nested); err != nil {
			return 0, err
		}
	}
	r = append(r, Element{End, 0})
	if err := p.grow(len(r)); err != nil {
		return 0, err
	}
	return pos, p.addRule(id, r)
}

// char is parse_char: one (possibly escaped) character.
func (p *parser) char(pos int) (uint32, int, error) {
	if p.at(pos) == '\\' {
		switch p.at(pos + 1) {
		case 'x':
			return p.hex(pos+2, 2)
		case 'u':
			return p.hex(pos+2, 4)
		case 'U':
			return p.hex(pos+2, 8)
		case 't':
			return '\t', pos + 2, nil
		case 'r':
			return '\r', pos + 2, nil
		case 'n':
			return '\n', pos + 2, nil
		case '\\', '"', '[', ']', '-':
			return uint32(p.at(pos + 1)), pos + 2, nil
		}
		return 0, 0, p.fail(pos, "unknown escape")
	}
	if p.at(pos) == 0 {
		return 0, 0, p.fail(pos, "unexpected end of input")
	}
	// decode_utf8 as llama.cpp does it: the length from the first byte's
	// high bits, continuation bytes taken unchecked.
	lookup := [16]int{1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4}
	first := p.at(pos)
	n := lookup[first>>4]
	v := uint32(first) & (1<<(8-n) - 1)
	end := pos + n
	i := pos + 1
	for ; i < end && p.at(i) != 0; i++ {
		v = v<<6 + uint32(p.at(i)&0x3f)
	}
	return v, i, nil
}

func (p *parser) hex(pos, size int) (uint32, int, error) {
	var v uint32
	i := pos
	for ; i < pos+size && p.at(i) != 0; i++ {
		c := p.at(i)
		v <<= 4
		switch {
		case 'a' <= c && c <= 'f':
			v += uint32(c-'a') + 10
		case 'A' <= c && c <= 'F':
			v += uint32(c-'A') + 10
		case '0' <= c && c <= '9':
			v += uint32(c - '0')
		default:
			return 0, 0, p.fail(pos, "expecting %d hex chars", size)
		}
	}
	if i != pos+size {
		return 0, 0, p.fail(pos, "expecting %d hex chars", size)
	}
	return v, i, nil
}

// token is parse_token: <[id]> or <text> (one token of the vocabulary).
func (p *parser) token(pos int) (uint32, int, error) {
	start := pos
	if p.at(pos) != '<' {
		return 0, 0, p.fail(pos, "expecting '<'")
	}
	pos++
	if p.at(pos) == '[' {
		pos++
		end, err := p.intEnd(pos)
		if err != nil {
			return 0, 0, err
		}
		// std::stoul: an unsigned long, then truncated to 32 bits.
		v, err := strconv.ParseUint(p.src[pos:end], 10, 64)
		if err != nil {
			return 0, 0, p.fail(pos, "token id out of range")
		}
		pos = end
		if p.at(pos) != ']' {
			return 0, 0, p.fail(pos, "expecting ']'")
		}
		pos++
		if p.at(pos) != '>' {
			return 0, 0, p.fail(pos, "expecting '>'")
		}
		return uint32(v), pos + 1, nil
	}
	for p.at(pos) != 0 && p.at(pos) != '>' {
		pos++
	}
	if p.at(pos) != '>' {
		return 0, 0, p.fail(pos, "expecting '>'")
	}
	if pos-start-1 > 0 && !utf8.ValidString(p.src[start:pos+1]) {
		return 0, 0, p.fail(start, "token text is not valid UTF-8")
	}
	p.tokens = true
	return 0, pos + 1, nil
}

// sequence is parse_sequence: the items of one alternate, appended to *r,
// up to the first byte that cannot start an item. Each item kind is one
// method below, named by the branch of llama.cpp's parse_sequence it
// mirrors, in the same order.
func (p *parser) sequence(pos int, name string, r *[]Element, nested bool) (int, error) {
	s := &sequence{p: p, name: name, r: r, nested: nested, lastSym: len(*r), nPrev: 1}
	for p.at(pos) != 0 {
		var err error
		switch c := p.at(pos); {
		case c == '"':
			pos, err = s.literal(pos)
		case c == '[':
			pos, err = s.charRanges(pos)
		case c == '<' || c == '!':
			pos, err = s.token(pos)
		case isWordChar(c):
			pos, err = s.ruleRef(pos)
		case c == '(':
			pos, err = s.group(pos)
		case c == '.':
			pos = s.anyChar(pos)
		case c == '*':
			pos, err = s.repeatOp(pos, 0, math.MaxUint64)
		case c == '+':
			pos, err = s.repeatOp(pos, 1, math.MaxUint64)
		case c == '?':
			pos, err = s.repeatOp(pos, 0, 1)
		case c == '{':
			pos, err = s.braces(pos)
		default:
			return pos, nil
		}
		if err != nil {
			return 0, err
		}
	}
	return pos, nil
}

// sequence holds parse_sequence's state between items: the rule being
// built, where its last item starts (last_sym_start) and how many rules
// that item generated (n_prev_rules), which a following repetition
// operator copies and counts.
type sequence struct {
	p       *parser
	name    string
	r       *[]Element
	nested  bool
	lastSym int
	nPrev   uint64
}

// item marks the start of a new item that generated no rules: a
// repetition operator after it applies to it alone.
func (s *sequence) item() {
	s.lastSym = len(*s.r)
	s.nPrev = 1
}

// literal is the literal string branch ("...").
func (s *sequence) literal(pos int) (int, error) {
	p := s.p
	pos++
	s.item()
	for p.at(pos) != '"' {
		if p.at(pos) == 0 {
			return 0, p.fail(pos, "unexpected end of input")
		}
		v, next, err := p.char(pos)
		if err != nil {
			return 0, err
		}
		pos = next
		*s.r = append(*s.r, Element{Char, v})
	}
	return p.space(pos+1, s.nested), nil
}

// charRanges is the char range(s) branch ([...] and [^...]).
func (s *sequence) charRanges(pos int) (int, error) {
	p := s.p
	pos++
	start := Char
	if p.at(pos) == '^' {
		pos++
		start = CharNot
	}
	s.item()
	for p.at(pos) != ']' {
		if p.at(pos) == 0 {
			return 0, p.fail(pos, "unexpected end of input")
		}
		v, next, err := p.char(pos)
		if err != nil {
			return 0, err
		}
		pos = next
		t := start
		if s.lastSym < len(*s.r) {
			t = CharAlt
		}
		*s.r = append(*s.r, Element{t, v})
		if p.at(pos) == '-' && p.at(pos+1) != ']' {
			if p.at(pos+1) == 0 {
				return 0, p.fail(pos, "unexpected end of input")
			}
			v, next, err := p.char(pos + 1)
			if err != nil {
				return 0, err
			}
			pos = next
			*s.r = append(*s.r, Element{CharRngUpper, v})
		}
	}
	return p.space(pos+1, s.nested), nil
}

// token is the token branch (<[id]>, <text>, and ! before either).
func (s *sequence) token(pos int) (int, error) {
	p := s.p
	t := Token
	if p.at(pos) == '!' {
		t = TokenNot
		pos++
	}
	v, end, err := p.token(pos)
	if err != nil {
		return 0, err
	}
	s.item()
	*s.r = append(*s.r, Element{t, v})
	return p.space(end, s.nested), nil
}

// ruleRef is the rule reference branch (a name).
func (s *sequence) ruleRef(pos int) (int, error) {
	p := s.p
	end, err := p.nameEnd(pos)
	if err != nil {
		return 0, err
	}
	id := p.symbol(p.src[pos:end])
	if int(id) >= p.lim.MaxRules {
		return 0, p.limit("more than %d rules (groups and repetitions count as rules)", p.lim.MaxRules)
	}
	pos = p.space(end, s.nested)
	s.item()
	*s.r = append(*s.r, Element{RuleRef, id})
	return pos, nil
}

// group is the grouping branch ((...)): the alternates inside become a
// generated rule, referenced here.
func (s *sequence) group(pos int) (int, error) {
	p := s.p
	// The one place llama.cpp's parser recurses: bound it here.
	if p.depth >= p.lim.MaxNesting {
		return 0, p.limit("groups nested more than %d deep at byte %d", p.lim.MaxNesting, pos)
	}
	pos = p.space(pos+1, true)
	before := len(p.symbols)
	sub := p.generate(s.name)
	p.depth++
	next, err := p.alternates(pos, s.name, sub, true)
	p.depth--
	if err != nil {
		return 0, err
	}
	pos = next
	s.nPrev = uint64(max(1, len(p.symbols)-before))
	s.lastSym = len(*s.r)
	*s.r = append(*s.r, Element{RuleRef, sub})
	if p.at(pos) != ')' {
		return 0, p.fail(pos, "expecting ')'")
	}
	return p.space(pos+1, s.nested), nil
}

// anyChar is the any char branch (.).
func (s *sequence) anyChar(pos int) int {
	s.item()
	*s.r = append(*s.r, Element{CharAny, 0})
	return s.p.space(pos+1, s.nested)
}

// repeatOp is the *, + and ? branches: handle_repetitions on the last item.
func (s *sequence) repeatOp(pos int, minTimes, maxTimes uint64) (int, error) {
	next := s.p.space(pos+1, s.nested)
	if err := s.repeat(pos, minTimes, maxTimes); err != nil {
		return 0, err
	}
	return next, nil
}

// braces is the {m}, {m,} and {m,n} branch: the counts, then
// handle_repetitions on the last item.
func (s *sequence) braces(pos int) (int, error) {
	p := s.p
	at := pos
	pos = p.space(pos+1, s.nested)
	if !isDigit(p.at(pos)) {
		return 0, p.fail(pos, "expecting an int")
	}
	end, _ := p.intEnd(pos)
	minTimes, err := strconv.ParseUint(p.src[pos:end], 10, 64)
	if err != nil {
		return 0, p.fail(pos, "repetition count out of range")
	}
	pos = p.space(end, s.nested)
	var maxTimes uint64 = math.MaxUint64
	switch p.at(pos) {
	case '}':
		maxTimes = minTimes
		pos = p.space(pos+1, s.nested)
	case ',':
		pos = p.space(pos+1, s.nested)
		if isDigit(p.at(pos)) {
			end, _ := p.intEnd(pos)
			if maxTimes, err = strconv.ParseUint(p.src[pos:end], 10, 64); err != nil {
				return 0, p.fail(pos, "repetition count out of range")
			}
			pos = p.space(end, s.nested)
		}
		if p.at(pos) != '}' {
			return 0, p.fail(pos, "expecting '}'")
		}
		pos = p.space(pos+1, s.nested)
	default:
		return 0, p.fail(pos, "expecting ','")
	}
	if minTimes > maxRepetition {
		return 0, p.fail(at, "number of repetitions exceeds %d", maxRepetition)
	}
	if maxTimes != math.MaxUint64 && maxTimes > maxRepetition {
		maxTimes = math.MaxUint64
	}
	if err := s.repeat(at, minTimes, maxTimes); err != nil {
		return 0, err
	}
	return pos, nil
}

// repeat is handle_repetitions: the last item, which starts at lastSym,
// repeated minTimes to maxTimes times (math.MaxUint64: no maximum), by
// copies of it and generated rules for the optional ones.
func (s *sequence) repeat(at int, minTimes, maxTimes uint64) error {
	p, r := s.p, s.r
	noMax := maxTimes == math.MaxUint64
	if s.lastSym == len(*r) {
		return p.fail(at, "expecting preceding item to */+/?/{")
	}
	if !noMax && maxTimes < minTimes {
		// llama.cpp computes max−min in unsigned arithmetic and loops
		// about 2^64 times generating rules.
		return p.fail(at, "repetition {%d,%d}: the maximum is below the minimum", minTimes, maxTimes)
	}
	prev := append([]Element(nil), (*r)[s.lastSym:]...)
	var total uint64 = 1
	if !noMax && maxTimes > 0 {
		total = maxTimes
	} else if minTimes > 0 {
		total = minTimes
	}
	if s.nPrev*total > maxRepetition {
		return p.fail(at, "number of rules that are going to be repeated multiplied by the new repetition exceeds %d", maxRepetition)
	}
	var nOpt uint64 = 1
	if !noMax {
		nOpt = maxTimes - minTimes
	}
	// Everything below is bounded by the counts checked above (at most
	// 2000 copies, 2000 generated rules): check what it will add first.
	grown := len(*r) + int(nOpt)*(len(prev)+3)
	if minTimes > 1 {
		grown += int(minTimes-1) * len(prev)
	}
	if err := p.grow(grown); err != nil {
		return err
	}
	if minTimes == 0 {
		*r = (*r)[:s.lastSym]
	}
	for i := uint64(1); i < minTimes; i++ {
		*r = append(*r, prev...)
	}
	var lastRec uint32
	for i := uint64(0); i < nOpt; i++ {
		rec := append(make([]Element, 0, len(prev)+3), prev...)
		id := p.generate(s.name)
		if i > 0 || noMax {
			ref := lastRec
			if noMax {
				ref = id
			}
			rec = append(rec, Element{RuleRef, ref})
		}
		rec = append(rec, Element{Alt, 0}, Element{End, 0})
		if err := p.addRule(id, rec); err != nil {
			return err
		}
		lastRec = id
	}
	if nOpt > 0 {
		*r = append(*r, Element{RuleRef, lastRec})
	}
	s.nPrev *= total
	return nil
}
