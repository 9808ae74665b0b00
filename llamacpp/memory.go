package llamacpp

import "fmt"

var (
	// llama_memory_t llama_get_memory(const struct llama_context * ctx);
	llamaGetMemory func(c uintptr) uintptr
	// void llama_memory_clear(llama_memory_t mem, bool data);
	llamaMemoryClear func(m uintptr, data bool)
	// bool llama_memory_seq_rm(llama_memory_t mem, llama_seq_id seq_id, llama_pos p0, llama_pos p1);
	llamaMemorySeqRm func(m uintptr, seq, p0, p1 int32) bool
	// void llama_memory_seq_cp(llama_memory_t mem, llama_seq_id seq_id_src, llama_seq_id seq_id_dst, llama_pos p0, llama_pos p1);
	llamaMemorySeqCp func(m uintptr, src, dst, p0, p1 int32)
	// void llama_memory_seq_keep(llama_memory_t mem, llama_seq_id seq_id);
	llamaMemorySeqKeep func(m uintptr, seq int32)
	// llama_pos llama_memory_seq_pos_min(llama_memory_t mem, llama_seq_id seq_id);
	llamaMemorySeqPosMin func(m uintptr, seq int32) int32
	// llama_pos llama_memory_seq_pos_max(llama_memory_t mem, llama_seq_id seq_id);
	llamaMemorySeqPosMax func(m uintptr, seq int32) int32
)

func init() {
	register(func(libs libraries) error {
		return bindAll(libs.llama, []binding{{&llamaGetMemory, "llama_get_memory"},
			{&llamaMemoryClear, "llama_memory_clear"},
			{&llamaMemorySeqRm, "llama_memory_seq_rm"},
			{&llamaMemorySeqCp, "llama_memory_seq_cp"},
			{&llamaMemorySeqKeep, "llama_memory_seq_keep"},
			{&llamaMemorySeqPosMin, "llama_memory_seq_pos_min"},
			{&llamaMemorySeqPosMax, "llama_memory_seq_pos_max"},
		})
	})
}

// Memory is a context's KV cache (llama_memory_t). Positions ranges are
// [p0, p1); p0 < 0 means from 0 and p1 < 0 means to the end.
//
// Sequence ids are checked in Go: llama.cpp aborts the process on an id
// outside 0..n_seq_max-1. Without a unified KV cache every sequence has its
// own stream, so SeqKeep only clears other sequences' cells that share the
// kept sequence's stream, and SeqCp copies cells between streams.
type Memory struct {
	ptr     uintptr
	nSeqMax int32
	unified bool
}

// Memory returns the context's memory.
func (c *LlamaContext) Memory() Memory {
	return Memory{ptr: llamaGetMemory(c.ptr), nSeqMax: int32(c.NSeqMax()), unified: c.unified}
}

func (m Memory) check(seqs ...int32) error {
	for _, s := range seqs {
		if s < 0 || s >= m.nSeqMax {
			return fmt.Errorf("llamacpp: sequence id %d outside 0..%d", s, m.nSeqMax-1)
		}
	}
	return nil
}

// Clear empties the cache (data also zeroes the buffers).
func (m Memory) Clear(data bool) { llamaMemoryClear(m.ptr, data) }

// SeqRm removes the tokens of seq (seq < 0: every sequence) at positions
// in [p0, p1). Removing a whole sequence never fails; a partial removal
// that the cache cannot do is an error.
func (m Memory) SeqRm(seq, p0, p1 int32) error {
	if seq >= m.nSeqMax {
		return m.check(seq)
	}
	if !llamaMemorySeqRm(m.ptr, seq, p0, p1) {
		return fmt.Errorf("llamacpp: cannot remove positions [%d, %d) of sequence %d", p0, p1, seq)
	}
	return nil
}

// SeqCp makes the tokens of src in [p0, p1) also belong to dst. Without a
// unified cache the sequences live in different streams and only whole
// sequences can be copied (p0 < 0 and p1 < 0; trim dst with SeqRm after);
// llama.cpp aborts on a partial cross-stream copy, so that is an error here.
func (m Memory) SeqCp(src, dst, p0, p1 int32) error {
	if err := m.check(src, dst); err != nil {
		return err
	}
	if !m.unified && src != dst && (p0 > 0 || p1 >= 0) {
		return fmt.Errorf("llamacpp: seq_cp %d→%d of [%d, %d): without a unified KV cache only whole sequences can be copied", src, dst, p0, p1)
	}
	llamaMemorySeqCp(m.ptr, src, dst, p0, p1)
	return nil
}

// SeqKeep removes every token not belonging to seq.
func (m Memory) SeqKeep(seq int32) error {
	if err := m.check(seq); err != nil {
		return err
	}
	llamaMemorySeqKeep(m.ptr, seq)
	return nil
}

// SeqPosMin is the smallest cached position of seq (-1 when empty).
func (m Memory) SeqPosMin(seq int32) int32 {
	if m.check(seq) != nil {
		return -1
	}
	return llamaMemorySeqPosMin(m.ptr, seq)
}

// SeqPosMax is the largest cached position of seq (-1 when empty).
func (m Memory) SeqPosMax(seq int32) int32 {
	if m.check(seq) != nil {
		return -1
	}
	return llamaMemorySeqPosMax(m.ptr, seq)
}
