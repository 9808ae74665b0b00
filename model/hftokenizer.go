package model

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/omar-selfplay/omar/gguf"
)

// HFTokenizer is a Hugging Face byte-level BPE tokenizer (tokenizer.json
// and tokenizer_config.json) converted to llama.cpp's GGUF vocabulary, as
// llama.cpp's convert_hf_to_gguf.py converts it (get_vocab_base,
// SpecialVocab): the same token list and types, merges, special token ids,
// add-BOS/EOS flags and chat template, and the pre-tokenizer named by
// tokenizer.ggml.pre. The converter recognises the pre-tokenizer by
// hashing a tokenisation of a check text; without transformers at hand we
// recognise it by its regular expression (PreTokenizers).
type HFTokenizer struct {
	// Tokens holds the texts by id (byte-level alphabet for ordinary
	// tokens, literal text for added ones); ids no token has are absent
	// ("") until write pads them.
	Tokens []string
	Types  []int32  // TokenNormal, TokenControl, TokenUserDefined
	Merges []string // "left right", spaces inside a part written as U+0120 (Ġ)
	Pre    string   // tokenizer.ggml.pre
	// Special token ids (-1: none): bos, eos, unk, sep, pad, cls, mask as
	// tokenizer_config.json names them, and eot, the end of a chat turn.
	BOS, EOS, EOT, UNK, SEP, PAD, CLS, MASK int32
	// AddBOS and AddEOS are tokenizer_config.json's add_bos_token and
	// add_eos_token (or what the post-processor implies); nil when unsaid,
	// leaving llama.cpp's default for the pre-tokenizer (llama-bpe adds a
	// BOS, qwen2 does not).
	AddBOS, AddEOS *bool
	// ChatTemplate is tokenizer_config.json's chat_template, verbatim.
	ChatTemplate string
	// NamedTemplates are the further templates of a config whose
	// chat_template is a list (tokenizer.chat_template.NAME).
	NamedTemplates map[string]string
}

// PreTokenizers maps the Split regex of a tokenizer.json pre-tokenizer to
// the tokenizer.ggml.pre name whose expression llama.cpp applies for it
// (llama-vocab.cpp; llama.cpp rewrites "(?i:'s|…)" as "(?:'[sS]|…)",
// which matches the same text). Qwen2 and Qwen3 split digits one by one,
// Llama 3 in groups of up to three.
var PreTokenizers = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      "qwen2",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
}

// endOfTurnTexts are the end-of-turn tokens of known chat formats, in the
// order they are preferred as tokenizer.ggml.eot_token_id when the chat
// template uses them. llama.cpp guesses EOT from token texts too, but in
// hash-map order: a Qwen vocabulary has both <|im_end|> and <|endoftext|>.
var endOfTurnTexts = []string{"<|im_end|>", "<|eot_id|>", "<end_of_turn>", "<|end|>"}

// maxVocab bounds the ids a tokenizer.json may use (the largest real
// vocabularies have about 260,000 tokens).
const maxVocab = 1 << 22

// hfTokenizerJSON is the part of tokenizer.json the conversion reads.
type hfTokenizerJSON struct {
	AddedTokens   []hfAddedToken  `json:"added_tokens"`
	Normalizer    json.RawMessage `json:"normalizer"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       json.RawMessage `json:"decoder"`
	Model         struct {
		Type         string           `json:"type"`
		Vocab        map[string]int32 `json:"vocab"`
		Merges       json.RawMessage  `json:"merges"`
		ByteFallback bool             `json:"byte_fallback"`
	} `json:"model"`
}

type hfAddedToken struct {
	ID         int32  `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

// hfComponent is a normalizer, pre-tokenizer, decoder or post-processor.
type hfComponent struct {
	Type          string          `json:"type"`
	Pattern       json.RawMessage `json:"pattern"`
	Behavior      string          `json:"behavior"`
	Invert        bool            `json:"invert"`
	UseRegex      *bool           `json:"use_regex"`
	AddPrefix     bool            `json:"add_prefix_space"`
	PreTokenizers []hfComponent   `json:"pretokenizers"`
	Normalizers   []hfComponent   `json:"normalizers"`
	Processors    []hfComponent   `json:"processors"`
	Single        []struct {
		SpecialToken *struct {
			ID string `json:"id"`
		} `json:"SpecialToken"`
	} `json:"single"`
}

// ReadHFTokenizer reads tokenizer.json and tokenizer_config.json from dir.
// Only byte-level BPE tokenizers whose pre-tokenizer llama.cpp knows by
// name (PreTokenizers) are accepted; anything else is refused with what
// is not supported.
func ReadHFTokenizer(dir string) (*HFTokenizer, error) {
	tj, err := os.ReadFile(filepath.Join(dir, "tokenizer.json"))
	if err != nil {
		return nil, fmt.Errorf("model: hugging face tokenizer: %w", err)
	}
	cj, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json"))
	if err != nil {
		return nil, fmt.Errorf("model: hugging face tokenizer: %w", err)
	}
	t, err := ParseHFTokenizer(tj, cj)
	if err != nil {
		return nil, fmt.Errorf("model: %s: %w", dir, err)
	}
	return t, nil
}

// ParseHFTokenizer converts the contents of tokenizer.json and
// tokenizer_config.json.
func ParseHFTokenizer(tokenizerJSON, configJSON []byte) (*HFTokenizer, error) {
	var tj hfTokenizerJSON
	if err := json.Unmarshal(tokenizerJSON, &tj); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &cfg); err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	if tj.Model.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q is not supported (only byte-level BPE)", tj.Model.Type)
	}
	if tj.Model.ByteFallback {
		return nil, fmt.Errorf("tokenizer.json: a BPE model with byte_fallback (SentencePiece-style, as Gemma's) is not supported; only byte-level BPE")
	}
	if err := checkNormalizer(tj.Normalizer); err != nil {
		return nil, err
	}
	if err := checkByteLevel("decoder", tj.Decoder); err != nil {
		return nil, err
	}
	t := &HFTokenizer{BOS: -1, EOS: -1, EOT: -1, UNK: -1, SEP: -1, PAD: -1, CLS: -1, MASK: -1}
	var err error
	if t.Pre, err = preTokenizerName(tj.PreTokenizer); err != nil {
		return nil, err
	}
	if t.Merges, err = parseMerges(tj.Model.Merges); err != nil {
		return nil, err
	}
	if err := t.fillVocabulary(tj); err != nil {
		return nil, err
	}
	if err := t.fillSpecial(tj, cfg); err != nil {
		return nil, err
	}
	return t, nil
}

// checkNormalizer accepts no normalizer or NFC. llama.cpp's BPE
// tokenizers do not normalise; NFC changes only text that is not already
// composed, which is how converted Qwen GGUFs behave as well.
func checkNormalizer(raw json.RawMessage) error {
	if len(raw) == 0 || string(raw) == "null" {
		return nil
	}
	var n hfComponent
	if err := json.Unmarshal(raw, &n); err != nil {
		return fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	if n.Type == "NFC" {
		return nil
	}
	return fmt.Errorf("tokenizer.json: normalizer %q is not supported (none or NFC)", n.Type)
}

func checkByteLevel(what string, raw json.RawMessage) error {
	var c hfComponent
	if len(raw) == 0 || json.Unmarshal(raw, &c) != nil || c.Type != "ByteLevel" {
		return fmt.Errorf("tokenizer.json: %s %s is not ByteLevel: only byte-level BPE tokenizers are supported", what, strings.TrimSpace(string(raw)))
	}
	return nil
}

// preTokenizerName finds the Split regex of a Sequence[Split, ByteLevel]
// pre-tokenizer and maps it to llama.cpp's name.
func preTokenizerName(raw json.RawMessage) (string, error) {
	var p hfComponent
	if err := json.Unmarshal(raw, &p); err != nil {
		return "", fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	parts := []hfComponent{p}
	if p.Type == "Sequence" {
		parts = p.PreTokenizers
	}
	var regex string
	byteLevel := false
	for _, c := range parts {
		switch c.Type {
		case "Split":
			var pat struct{ Regex *string }
			if err := json.Unmarshal(c.Pattern, &pat); err != nil || pat.Regex == nil {
				return "", fmt.Errorf("tokenizer.json: pre_tokenizer Split pattern %s is not a regex", c.Pattern)
			}
			if c.Behavior != "Isolated" || c.Invert {
				return "", fmt.Errorf("tokenizer.json: pre_tokenizer Split behaviour %q (invert %v) is not supported (Isolated)", c.Behavior, c.Invert)
			}
			regex = *pat.Regex
		case "ByteLevel":
			if c.UseRegex != nil && *c.UseRegex || c.AddPrefix {
				return "", fmt.Errorf("tokenizer.json: ByteLevel pre-tokenizer with its own regex or prefix space is not supported")
			}
			byteLevel = true
		default:
			return "", fmt.Errorf("tokenizer.json: pre-tokenizer %q is not supported", c.Type)
		}
	}
	if !byteLevel {
		return "", fmt.Errorf("tokenizer.json: the pre-tokenizer has no ByteLevel step: only byte-level BPE tokenizers are supported")
	}
	name, ok := PreTokenizers[regex]
	if !ok {
		return "", fmt.Errorf("tokenizer.json: pre-tokenizer regex %q is not one llama.cpp is known to implement here (Qwen2/Qwen3: qwen2, Llama 3: llama-bpe)", regex)
	}
	return name, nil
}

// parseMerges reads merges as "a b" strings or as [a, b] pairs (the
// format since transformers 4.45). A space inside a pair's part is
// written as U+0120, as the converter does, so that llama.cpp's split on
// the first space finds the two parts.
func parseMerges(raw json.RawMessage) ([]string, error) {
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		if len(asStrings) == 0 {
			return nil, fmt.Errorf("tokenizer.json: no merges")
		}
		return asStrings, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("tokenizer.json: merges are neither strings nor pairs: %w", err)
	}
	if len(pairs) == 0 {
		return nil, fmt.Errorf("tokenizer.json: no merges")
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("tokenizer.json: merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = strings.ReplaceAll(p[0], " ", "\u0120") + " " + strings.ReplaceAll(p[1], " ", "\u0120")
	}
	return out, nil
}

// fillVocabulary lays out the tokens by id: the model's vocabulary as
// normal tokens, then the added tokens as control tokens (special, or
// looking special as the converter's does_token_look_special decides) or
// user-defined ones.
func (t *HFTokenizer) fillVocabulary(tj hfTokenizerJSON) error {
	n := int32(0)
	for _, id := range tj.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range tj.AddedTokens {
		n = max(n, a.ID+1)
	}
	if n <= 0 {
		return fmt.Errorf("tokenizer.json: empty vocabulary")
	}
	if n > maxVocab {
		return fmt.Errorf("tokenizer.json: token id %d is past the %d this import accepts", n-1, maxVocab)
	}
	t.Tokens = make([]string, n)
	t.Types = make([]int32, n)
	for s, id := range tj.Model.Vocab {
		if id < 0 {
			return fmt.Errorf("tokenizer.json: token %q has id %d", s, id)
		}
		if t.Tokens[id] != "" {
			return fmt.Errorf("tokenizer.json: id %d is both %q and %q", id, t.Tokens[id], s)
		}
		t.Tokens[id], t.Types[id] = s, TokenNormal
	}
	for _, a := range tj.AddedTokens {
		if a.ID < 0 || a.Content == "" {
			return fmt.Errorf("tokenizer.json: added token %q has id %d", a.Content, a.ID)
		}
		text, typ := a.Content, TokenUserDefined
		if a.Special || looksSpecial(text) {
			typ = TokenControl
		} else {
			text = strings.ReplaceAll(text, "\u2581", " ")
		}
		t.Tokens[a.ID], t.Types[a.ID] = text, typ
	}
	seen := make(map[string]int32, len(t.Tokens))
	for id, s := range t.Tokens {
		if s == "" {
			continue
		}
		if prev, dup := seen[s]; dup {
			return fmt.Errorf("tokenizer.json: ids %d and %d are both %q (llama.cpp needs distinct token texts)", prev, id, s)
		}
		seen[s] = int32(id)
	}
	return nil
}

// looksSpecial is the converter's does_token_look_special.
func looksSpecial(s string) bool {
	return s == "<pad>" || s == "<mask>" || s == "<2mass>" || s == "[@BOS@]" ||
		strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// fillSpecial reads the special tokens, the add-BOS/EOS flags and the
// chat template from tokenizer_config.json (SpecialVocab's rules: a
// token given by content is looked up among the added tokens).
func (t *HFTokenizer) fillSpecial(tj hfTokenizerJSON, cfg map[string]json.RawMessage) error {
	tokenText := func(key string) string {
		raw, ok := cfg[key]
		if !ok {
			return ""
		}
		var s string
		if json.Unmarshal(raw, &s) == nil {
			return s
		}
		var obj struct{ Content string }
		if json.Unmarshal(raw, &obj) == nil {
			return obj.Content
		}
		return ""
	}
	added := func(text string) int32 {
		for _, a := range tj.AddedTokens {
			if text != "" && a.Content == text {
				return a.ID
			}
		}
		return -1
	}
	bos, cls := tokenText("bos_token"), tokenText("cls_token")
	eos, sep := tokenText("eos_token"), tokenText("sep_token")
	if bos == "" {
		bos = cls
	}
	if eos == "" {
		eos = sep
	}
	for _, s := range []struct {
		dst  *int32
		text string
	}{{&t.BOS, bos}, {&t.EOS, eos}, {&t.UNK, tokenText("unk_token")}, {&t.SEP, sep},
		{&t.PAD, tokenText("pad_token")}, {&t.CLS, cls}, {&t.MASK, tokenText("mask_token")}} {
		*s.dst = added(s.text)
	}
	flag := func(key string) *bool {
		var b bool
		if raw, ok := cfg[key]; ok && json.Unmarshal(raw, &b) == nil {
			return &b
		}
		return nil
	}
	t.AddBOS, t.AddEOS = flag("add_bos_token"), flag("add_eos_token")
	// A TemplateProcessing post-processor that starts with the BOS (Llama
	// 3.1's) adds it; the converter reads it the same way.
	if len(tj.PostProcessor) > 0 && string(tj.PostProcessor) != "null" {
		var pp hfComponent
		if err := json.Unmarshal(tj.PostProcessor, &pp); err != nil {
			return fmt.Errorf("tokenizer.json: post_processor: %w", err)
		}
		procs := pp.Processors
		if len(procs) == 0 {
			procs = []hfComponent{pp}
		}
		for _, p := range procs {
			if p.Type != "TemplateProcessing" || len(p.Single) < 2 {
				continue
			}
			if st := p.Single[0].SpecialToken; st != nil && t.AddBOS == nil {
				b := st.ID == bos
				t.AddBOS = &b
			}
			if st := p.Single[len(p.Single)-1].SpecialToken; st != nil && t.AddEOS == nil {
				b := st.ID == eos
				t.AddEOS = &b
			}
		}
	}
	if raw, ok := cfg["chat_template"]; ok {
		var s string
		var list []struct{ Name, Template string }
		switch {
		case json.Unmarshal(raw, &s) == nil:
			t.ChatTemplate = s
		case json.Unmarshal(raw, &list) == nil:
			for _, e := range list {
				if e.Name == "default" {
					t.ChatTemplate = e.Template
					continue
				}
				if t.NamedTemplates == nil {
					t.NamedTemplates = map[string]string{}
				}
				t.NamedTemplates[e.Name] = e.Template
			}
		default:
			return fmt.Errorf("tokenizer_config.json: chat_template is neither a string nor a list of named templates")
		}
	}
	for _, s := range endOfTurnTexts {
		if id := added(s); id >= 0 && t.Types[id] == TokenControl && (t.ChatTemplate == "" || strings.Contains(t.ChatTemplate, s)) {
			t.EOT = id
			break
		}
	}
	if t.EOT < 0 {
		t.EOT = t.EOS
	}
	return nil
}

// fillFromConfig sets the BOS and EOS that tokenizer_config.json left
// unset from the shape's config.json values, as the converter does
// (SpecialVocab reads config.json after the tokenizer's files), when the
// tokenizer has those tokens. EOT follows EOS where it was unset.
func (t *HFTokenizer) fillFromConfig(s Shape) {
	find := func(text string) int32 {
		if text == "" {
			return -1
		}
		return int32(slices.Index(t.Tokens, text))
	}
	if t.BOS < 0 {
		t.BOS = find(s.BOSToken)
	}
	if t.EOS < 0 {
		t.EOS = find(s.EOSToken)
		if t.EOT < 0 {
			t.EOT = t.EOS
		}
	}
}

// Size is the number of token ids the tokenizer uses (highest id + 1).
func (t *HFTokenizer) Size() int { return len(t.Tokens) }

// write sets the tokenizer keys of a model with vocabSize embedding rows.
// Rows past the tokenizer's ids, and ids no token has, become unused
// "[PADn]" tokens, as the converter pads Qwen's 151,669 tokens to the
// 151,936 rows of its embedding.
func (t *HFTokenizer) write(w *gguf.Writer, vocabSize int) error {
	if vocabSize < len(t.Tokens) {
		return fmt.Errorf("model: %d embedding rows for a tokenizer of %d tokens", vocabSize, len(t.Tokens))
	}
	tokens := make([]string, vocabSize)
	types := make([]int32, vocabSize)
	for i := range tokens {
		if i < len(t.Tokens) && t.Tokens[i] != "" {
			tokens[i], types[i] = t.Tokens[i], t.Types[i]
		} else {
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), TokenUnused
		}
	}
	var err error
	set := func(k string, v any) {
		if err == nil {
			err = w.Set(k, v)
		}
	}
	set("tokenizer.ggml.model", "gpt2")
	set("tokenizer.ggml.pre", t.Pre)
	set("tokenizer.ggml.tokens", tokens)
	set("tokenizer.ggml.token_type", types)
	set("tokenizer.ggml.merges", t.Merges)
	for _, id := range []struct {
		key string
		id  int32
	}{{"bos", t.BOS}, {"eos", t.EOS}, {"eot", t.EOT}, {"unknown", t.UNK}, {"seperator", t.SEP},
		{"padding", t.PAD}, {"cls", t.CLS}, {"mask", t.MASK}} {
		if id.id >= 0 {
			set("tokenizer.ggml."+id.key+"_token_id", uint32(id.id))
		}
	}
	if t.AddBOS != nil {
		set("tokenizer.ggml.add_bos_token", *t.AddBOS)
	}
	if t.AddEOS != nil {
		set("tokenizer.ggml.add_eos_token", *t.AddEOS)
	}
	if t.ChatTemplate != "" {
		set("tokenizer.chat_template", t.ChatTemplate)
	}
	names := make([]string, 0, len(t.NamedTemplates))
	for name := range t.NamedTemplates {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		set("tokenizer.chat_template."+name, t.NamedTemplates[name])
	}
	return err
}
