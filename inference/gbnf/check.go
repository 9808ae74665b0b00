package gbnf

import (
	"errors"
	"fmt"
)

// Limits bound what a grammar may make llama.cpp do. The defaults admit
// every grammar the games, the judge and the proxy's json_object use with
// room to spare, and stay far below what crashes llama.cpp v0.5.0 on an
// 8 MiB thread stack (docs/grammars.md has the measurements).
type Limits struct {
	// MaxBytes bounds the grammar text.
	MaxBytes int
	// MaxNesting bounds how deep parenthesised groups nest: llama.cpp's
	// parser recurses once per level (about 18,000 levels overflow an
	// 8 MiB stack).
	MaxNesting int
	// MaxRules bounds the rules after llama.cpp rewrites groups and
	// repetitions into generated rules.
	MaxRules int
	// MaxElements bounds the elements of all rules after that rewriting
	// ("x"{2000} is 2,000 elements; each takes 8 bytes in llama.cpp).
	MaxElements int
	// MaxLeftDepth bounds the longest chain of rules each referenced at
	// the left of the previous one (after nullable rules): llama.cpp's
	// left-recursion check recurses along it (a chain of 150,000 rules
	// overflows the stack).
	MaxLeftDepth int
	// MaxLeftCalls bounds the calls that check makes in all: it does not
	// remember rules it already cleared, so it walks every leftmost path,
	// which doubles with each level of "a ::= b | b c".
	MaxLeftCalls int
	// MaxExpansion bounds the parse stacks one position of the grammar
	// expands into (llama_grammar_advance_stack): nested optional groups
	// multiply them, and every candidate token is checked against every
	// stack at every step.
	MaxExpansion int
}

// Defaults returns the limits used where none are given.
func (Limits) Defaults() Limits {
	return Limits{
		MaxBytes:     128 << 10,
		MaxNesting:   64,
		MaxRules:     8192,
		MaxElements:  1 << 18,
		MaxLeftDepth: 256,
		MaxLeftCalls: 1 << 16,
		MaxExpansion: 1024,
	}
}

// Validate checks that every limit is positive.
func (l Limits) Validate() error {
	for _, f := range []struct {
		name string
		v    int
	}{{"max_bytes", l.MaxBytes}, {"max_nesting", l.MaxNesting}, {"max_rules", l.MaxRules},
		{"max_elements", l.MaxElements}, {"max_left_depth", l.MaxLeftDepth},
		{"max_left_calls", l.MaxLeftCalls}, {"max_expansion", l.MaxExpansion}} {
		if f.v <= 0 {
			return fmt.Errorf("gbnf: limit %s = %d: want > 0", f.name, f.v)
		}
	}
	return nil
}

// ErrLeftRecursion is wrapped by the error for a left-recursive grammar,
// which llama.cpp cannot run (it refuses the direct kind; through a rule
// that is empty only by way of other rules, its stack expansion never ends).
var ErrLeftRecursion = errors.New("gbnf: left recursion")

// Check parses src and verifies that the rule root exists and that llama.cpp
// can run the grammar within lim. Every error wraps ErrLimit,
// ErrLeftRecursion or is a *SyntaxError.
func Check(src, root string, lim Limits) (*Grammar, error) {
	g, err := Parse(src, lim)
	if err != nil {
		return nil, err
	}
	if _, ok := g.Symbols[root]; !ok {
		return nil, &SyntaxError{Offset: len(src), Msg: fmt.Sprintf("grammar does not contain a %q rule", root)}
	}
	if err := g.bound(lim); err != nil {
		return nil, err
	}
	return g, nil
}

// bound measures the left-corner graph and the stack expansion.
func (g *Grammar) bound(lim Limits) error {
	n := len(g.Rules)
	nullable := g.nullable()
	// edges[r]: the rules referenced at the left of an alternate of r,
	// after nullable references: what llama.cpp's left-recursion check
	// recurses into (it knows fewer rules nullable, so it follows a
	// subset of these edges).
	edges := make([][]uint32, n)
	for r, rule := range g.Rules {
		left := true
		for _, e := range rule {
			switch {
			case e.Type == End || e.Type == Alt:
				left = true
			case !left:
			case e.Type == RuleRef:
				edges[r] = append(edges[r], e.Value)
				left = nullable[e.Value]
			default:
				left = false
			}
		}
	}
	// Longest path and path counts over the edges, by an iterative
	// depth-first walk (a grammar may be deep: this must not recurse).
	const (
		unseen = iota
		open
		done
	)
	state := make([]uint8, n)
	depth := make([]int, n) // longest chain from r, counting r
	paths := make([]int, n) // calls llama.cpp makes from r, saturated
	sat := lim.MaxLeftCalls + 1
	type frame struct{ r, next int }
	for start := range n {
		if state[start] != unseen {
			continue
		}
		stack := []frame{{start, 0}}
		state[start] = open
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if f.next < len(edges[f.r]) {
				s := int(edges[f.r][f.next])
				f.next++
				switch state[s] {
				case open:
					return fmt.Errorf("%w: rule %s reaches itself at its left", ErrLeftRecursion, g.name(uint32(s)))
				case unseen:
					state[s] = open
					stack = append(stack, frame{s, 0})
				}
				continue
			}
			d, p := 1, 1
			for _, s := range edges[f.r] {
				d = max(d, depth[s]+1)
				p = min(sat, p+paths[s])
			}
			depth[f.r], paths[f.r], state[f.r] = d, p, done
			stack = stack[:len(stack)-1]
		}
	}
	// llama.cpp starts its check at every rule not yet cleared, in id
	// order; a start clears everything it reaches.
	cleared := make([]bool, n)
	calls := 0
	for r := range n {
		if d := depth[r]; d > lim.MaxLeftDepth {
			return fmt.Errorf("%w: a chain of %d rules each at the left of the previous (from rule %s), limit %d", ErrLimit, d, g.name(uint32(r)), lim.MaxLeftDepth)
		}
		if cleared[r] {
			continue
		}
		calls = min(sat, calls+paths[r])
		todo := []uint32{uint32(r)}
		cleared[r] = true
		for len(todo) > 0 {
			x := todo[len(todo)-1]
			todo = todo[:len(todo)-1]
			for _, s := range edges[x] {
				if !cleared[s] {
					cleared[s] = true
					todo = append(todo, s)
				}
			}
		}
	}
	if calls > lim.MaxLeftCalls {
		return fmt.Errorf("%w: checking the grammar for left recursion takes more than %d steps (alternates that share their leftmost rule, nested)", ErrLimit, lim.MaxLeftCalls)
	}
	return g.expansion(nullable, lim)
}

// nullable reports, per rule, whether it derives the empty string.
func (g *Grammar) nullable() []bool {
	out := make([]bool, len(g.Rules))
	for changed := true; changed; {
		changed = false
		for r, rule := range g.Rules {
			if out[r] {
				continue
			}
			empty := true // the current alternate so far
			for _, e := range rule {
				switch {
				case e.Type == End || e.Type == Alt:
					if empty {
						out[r], changed = true, true
					}
					empty = true
				case e.Type == RuleRef:
					empty = empty && out[e.Value]
				default:
					empty = false
				}
				if out[r] {
					break
				}
			}
		}
	}
	return out
}

// expansion bounds the stacks llama_grammar_advance_stack makes from each
// position: a reference expands into each alternate of its rule (and, when
// the rule can be empty, into what follows the reference too), down to a
// terminal. Identical stacks are merged by llama.cpp; distinct paths
// through the rules give distinct stacks, so the count of paths is what
// the expansion costs.
func (g *Grammar) expansion(nullable []bool, lim Limits) error {
	sat := lim.MaxExpansion + 1
	memo := make([][]int, len(g.Rules))
	for r := range g.Rules {
		memo[r] = make([]int, len(g.Rules[r]))
		for i := range memo[r] {
			memo[r][i] = -1
		}
	}
	const inProgress = -2
	// count is the stacks topped by a terminal that expanding (r, i)
	// gives without leaving rule r. The recursion follows references at
	// the left of alternates and the positions after nullable references,
	// whose depth the left-depth limit bounds.
	var count func(r uint32, i int) (int, error)
	count = func(r uint32, i int) (int, error) {
		rule := g.Rules[r]
		switch m := memo[r][i]; {
		case m == inProgress:
			return 0, fmt.Errorf("%w: rule %s reaches itself at its left", ErrLeftRecursion, g.name(r))
		case m >= 0:
			return m, nil
		}
		e := rule[i]
		var c int
		switch e.Type {
		case End, Alt:
			c = 0
		case RuleRef:
			memo[r][i] = inProgress
			sub := g.Rules[e.Value]
			for j := 0; j < len(sub); j++ {
				if j == 0 || sub[j-1].Type == Alt {
					k, err := count(e.Value, j)
					if err != nil {
						return 0, err
					}
					c = min(sat, c+k)
				}
			}
			if nullable[e.Value] {
				k, err := count(r, i+1)
				if err != nil {
					return 0, err
				}
				c = min(sat, c+k)
			}
		case CharRngUpper, CharAlt:
			// Inside a character set: not a place a stack stops.
			c = 0
		default:
			c = 1
		}
		memo[r][i] = c
		return c, nil
	}
	for r, rule := range g.Rules {
		for i, e := range rule {
			if e.Type != RuleRef {
				continue
			}
			c, err := count(uint32(r), i)
			if err != nil {
				return err
			}
			if c > lim.MaxExpansion {
				return fmt.Errorf("%w: rule %s expands into more than %d parse stacks at one position (nested optional or alternative groups), limit %d", ErrLimit, g.name(uint32(r)), lim.MaxExpansion, lim.MaxExpansion)
			}
		}
	}
	return nil
}

func (g *Grammar) name(id uint32) string {
	for n, i := range g.Symbols {
		if i == id {
			return n
		}
	}
	return fmt.Sprintf("#%d", id)
}
