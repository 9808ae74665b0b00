package llamacpp

import (
	"fmt"
	"unsafe"
)

// cBatch mirrors struct llama_batch (56 bytes, llama.h v0.5.0).
type cBatch struct {
	nTokens int32
	_       [4]byte
	token   *int32   // llama_token *
	embd    *float32 // float *
	pos     *int32   // llama_pos *
	nSeqID  *int32   // int32_t *
	seqID   **int32  // llama_seq_id **
	logits  *int8    // int8_t *
}

var (
	// struct llama_batch llama_batch_init(int32_t n_tokens, int32_t embd, int32_t n_seq_max);
	llamaBatchInit func(nTokens, embd, nSeqMax int32) cBatch
	// void llama_batch_free(struct llama_batch batch);
	llamaBatchFree func(b cBatch)
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaBatchInit, "llama_batch_init"},
			{&llamaBatchFree, "llama_batch_free"},
		})
	})
}

// Batch is a token batch for Decode, allocated in C memory (the library
// keeps pointers to it during the call). Close it when done.
type Batch struct {
	c       cBatch
	cap     int
	nSeqMax int
	// Go views of the C arrays.
	token  []int32
	pos    []int32
	nSeqID []int32
	seqID  []*int32
	logits []int8
}

// NewBatch allocates a batch of up to capacity tokens, each belonging to
// up to nSeqMax sequences.
func NewBatch(capacity, nSeqMax int) (*Batch, error) {
	if !Loaded() {
		return nil, ErrNotLoaded
	}
	if capacity < 1 || nSeqMax < 1 {
		return nil, fmt.Errorf("llamacpp: batch capacity %d and sequences per token %d must be ≥ 1", capacity, nSeqMax)
	}
	c := llamaBatchInit(int32(capacity), 0, int32(nSeqMax))
	if c.token == nil {
		return nil, fmt.Errorf("llamacpp: allocate batch of %d tokens failed", capacity)
	}
	return &Batch{
		c: c, cap: capacity, nSeqMax: nSeqMax,
		token:  unsafe.Slice(c.token, capacity),
		pos:    unsafe.Slice(c.pos, capacity),
		nSeqID: unsafe.Slice(c.nSeqID, capacity),
		seqID:  unsafe.Slice(c.seqID, capacity),
		logits: unsafe.Slice(c.logits, capacity),
	}, nil
}

// Close frees the batch. Safe to call twice.
func (b *Batch) Close() error {
	if b == nil || b.c.token == nil {
		return nil
	}
	llamaBatchFree(b.c)
	b.c = cBatch{}
	b.token, b.pos, b.nSeqID, b.seqID, b.logits = nil, nil, nil, nil, nil
	return nil
}

// Len is the number of tokens in the batch.
func (b *Batch) Len() int { return int(b.c.nTokens) }

// Cap is the capacity.
func (b *Batch) Cap() int { return b.cap }

// Clear empties the batch.
func (b *Batch) Clear() { b.c.nTokens = 0 }

// Add appends a token at position pos of sequence seq; logits asks for its
// output (its index for LlamaContext.Logits is the returned batch index).
func (b *Batch) Add(token, pos, seq int32, logits bool) (int, error) {
	return b.AddSeqs(token, pos, []int32{seq}, logits)
}

// AddSeqs appends a token shared by several sequences.
func (b *Batch) AddSeqs(token, pos int32, seqs []int32, logits bool) (int, error) {
	i := int(b.c.nTokens)
	if i >= b.cap {
		return 0, fmt.Errorf("llamacpp: batch full (%d tokens)", b.cap)
	}
	if len(seqs) == 0 || len(seqs) > b.nSeqMax {
		return 0, fmt.Errorf("llamacpp: token with %d sequences, batch allows 1..%d", len(seqs), b.nSeqMax)
	}
	b.token[i] = token
	b.pos[i] = pos
	b.nSeqID[i] = int32(len(seqs))
	ids := unsafe.Slice(b.seqID[i], b.nSeqMax)
	copy(ids, seqs)
	b.logits[i] = 0
	if logits {
		b.logits[i] = 1
	}
	b.c.nTokens++
	return i, nil
}
