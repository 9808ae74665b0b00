package model

import (
	"embed"
	"strings"
	"sync"
)

// The corpus the BPE merges are learned from: English prose and dialogue
// written for omar (no third-party text), covering the situations our
// environments produce (bargaining, voting, scheduling, chat turns, JSON
// moves). Changing it changes every generated vocabulary, so the golden
// test in tokenizer_test.go pins a hash of the merges.
//
//go:embed corpus/*.txt
var corpusFS embed.FS

// Corpus returns the built-in training text.
func Corpus() string {
	var b strings.Builder
	for _, name := range []string{"prose.txt", "dialogue.txt", "more.txt", "words.txt"} {
		data, err := corpusFS.ReadFile("corpus/" + name)
		if err != nil {
			panic("model: embedded corpus missing: " + err.Error()) // a build error, not a run-time one
		}
		b.Write(data)
		b.WriteByte('\n')
	}
	return b.String()
}

var (
	mergesMu    sync.Mutex
	mergesCache = map[int][]string{}
)

// corpusMerges trains (once per size) the merges for a vocabulary with
// vocabSize ordinary tokens.
func corpusMerges(vocabSize int) ([]string, error) {
	mergesMu.Lock()
	defer mergesMu.Unlock()
	if m, ok := mergesCache[vocabSize]; ok {
		return m, nil
	}
	m, err := TrainBPE(Corpus(), vocabSize)
	if err != nil {
		return nil, err
	}
	mergesCache[vocabSize] = m
	return m, nil
}
