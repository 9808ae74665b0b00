// Package gbnf parses llama.cpp's GBNF grammars in Go and bounds them, so
// that a grammar which would overflow llama.cpp's recursive parser, loop in
// its grammar-stack expansion or exhaust memory is refused with a clear
// error before it reaches llama_sampler_init_grammar.
//
// The parser follows llama.cpp v0.5.0's src/llama-grammar.cpp rule for
// rule: the same syntax, the same rewriting of groups and repetitions into
// generated rules (so rule and element counts are llama.cpp's), the same
// errors. On top of parsing, Check measures what llama.cpp's recursion and
// stack expansion would do with the rules (Limits) and refuses what exceeds
// the bounds. The package imports only the standard library, so the proxy
// and the CLI can check a grammar before any model is loaded.
package gbnf
