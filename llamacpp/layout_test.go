package llamacpp

import (
	"bufio"
	"os"
	"strconv"
	"strings"
	"testing"
	"unsafe"
)

// layout is one struct from testdata/llama-v0.5.0-layout.txt, which holds
// sizes and field offsets that gcc computed from the v0.5.0 headers.
type layout struct {
	size    uintptr
	offsets map[string]uintptr
}

func readLayouts(t *testing.T) map[string]layout {
	t.Helper()
	f, err := os.Open("testdata/llama-v0.5.0-layout.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]layout{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "  ") { // "  struct.field @offset"
			name, off, ok := strings.Cut(strings.TrimSpace(line), " @")
			if !ok {
				continue
			}
			st, field, _ := strings.Cut(name, ".")
			n, err := strconv.Atoi(off)
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			out[st].offsets[field] = uintptr(n)
			continue
		}
		fields := strings.Fields(line) // "struct size=N align=A"
		if len(fields) == 3 && strings.HasPrefix(fields[1], "size=") {
			n, err := strconv.Atoi(strings.TrimPrefix(fields[1], "size="))
			if err != nil {
				t.Fatalf("bad line %q", line)
			}
			out[fields[0]] = layout{size: uintptr(n), offsets: map[string]uintptr{}}
		}
	}
	return out
}

func TestLayout(t *testing.T) {
	want := readLayouts(t)
	var mp cModelParams
	var cp cContextParams
	var b cBatch
	var ta cTokenDataArray
	tests := []goLayout{
		{"llama_model_params", unsafe.Sizeof(mp), map[string]uintptr{
			"devices": unsafe.Offsetof(mp.devices), "tensor_buft_overrides": unsafe.Offsetof(mp.tensorBuftOverrides),
			"n_gpu_layers": unsafe.Offsetof(mp.nGPULayers), "split_mode": unsafe.Offsetof(mp.splitMode),
			"load_mode": unsafe.Offsetof(mp.loadMode), "lazy_mode": unsafe.Offsetof(mp.lazyMode),
			"main_gpu": unsafe.Offsetof(mp.mainGPU), "tensor_split": unsafe.Offsetof(mp.tensorSplit),
			"progress_callback": unsafe.Offsetof(mp.progressCallback), "progress_callback_user_data": unsafe.Offsetof(mp.progressCallbackUserData),
			"kv_overrides": unsafe.Offsetof(mp.kvOverrides), "vocab_only": unsafe.Offsetof(mp.vocabOnly),
			"check_tensors": unsafe.Offsetof(mp.checkTensors), "use_extra_bufts": unsafe.Offsetof(mp.useExtraBufts),
			"no_host": unsafe.Offsetof(mp.noHost), "no_alloc": unsafe.Offsetof(mp.noAlloc), "load_mtp": unsafe.Offsetof(mp.loadMTP),
		}},
		{"llama_context_params", unsafe.Sizeof(cp), map[string]uintptr{
			"n_ctx": unsafe.Offsetof(cp.nCtx), "n_batch": unsafe.Offsetof(cp.nBatch), "n_ubatch": unsafe.Offsetof(cp.nUBatch),
			"n_seq_max": unsafe.Offsetof(cp.nSeqMax), "n_rs_seq": unsafe.Offsetof(cp.nRSSeq),
			"n_outputs_max": unsafe.Offsetof(cp.nOutputsMax), "n_outputs_max_per_seq": unsafe.Offsetof(cp.nOutputsMaxPerSeq),
			"n_threads": unsafe.Offsetof(cp.nThreads), "n_threads_batch": unsafe.Offsetof(cp.nThreadsBatch),
			"ctx_type": unsafe.Offsetof(cp.ctxType), "rope_scaling_type": unsafe.Offsetof(cp.ropeScalingType),
			"pooling_type": unsafe.Offsetof(cp.poolingType), "attention_type": unsafe.Offsetof(cp.attentionType),
			"flash_attn_type": unsafe.Offsetof(cp.flashAttnType), "rope_freq_base": unsafe.Offsetof(cp.ropeFreqBase),
			"rope_freq_scale": unsafe.Offsetof(cp.ropeFreqScale), "yarn_ext_factor": unsafe.Offsetof(cp.yarnExtFactor),
			"yarn_attn_factor": unsafe.Offsetof(cp.yarnAttnFactor), "yarn_beta_fast": unsafe.Offsetof(cp.yarnBetaFast),
			"yarn_beta_slow": unsafe.Offsetof(cp.yarnBetaSlow), "yarn_orig_ctx": unsafe.Offsetof(cp.yarnOrigCtx),
			"defrag_thold": unsafe.Offsetof(cp.defragThold), "cb_eval": unsafe.Offsetof(cp.cbEval),
			"cb_eval_user_data": unsafe.Offsetof(cp.cbEvalUserData), "type_k": unsafe.Offsetof(cp.typeK),
			"type_v": unsafe.Offsetof(cp.typeV), "abort_callback": unsafe.Offsetof(cp.abortCallback),
			"abort_callback_data": unsafe.Offsetof(cp.abortCallbackData), "embeddings": unsafe.Offsetof(cp.embeddings),
			"offload_kqv": unsafe.Offsetof(cp.offloadKQV), "no_perf": unsafe.Offsetof(cp.noPerf),
			"op_offload": unsafe.Offsetof(cp.opOffload), "swa_full": unsafe.Offsetof(cp.swaFull),
			"kv_unified": unsafe.Offsetof(cp.kvUnified), "samplers": unsafe.Offsetof(cp.samplers),
			"n_samplers": unsafe.Offsetof(cp.nSamplers), "ctx_other": unsafe.Offsetof(cp.ctxOther),
		}},
		{"llama_batch", unsafe.Sizeof(b), map[string]uintptr{
			"token": unsafe.Offsetof(b.token), "embd": unsafe.Offsetof(b.embd), "pos": unsafe.Offsetof(b.pos),
			"n_seq_id": unsafe.Offsetof(b.nSeqID), "seq_id": unsafe.Offsetof(b.seqID), "logits": unsafe.Offsetof(b.logits),
		}},
		{"llama_token_data_array", unsafe.Sizeof(ta), map[string]uintptr{
			"data": unsafe.Offsetof(ta.data), "size": unsafe.Offsetof(ta.size),
			"selected": unsafe.Offsetof(ta.selected), "sorted": unsafe.Offsetof(ta.sorted),
		}},
	}
	checkLayouts(t, want, tests)
	if got := unsafe.Sizeof(TokenData{}); got != 12 {
		t.Errorf("llama_token_data: got size %d, want 12", got)
	}
}

// goLayout is a Go struct's size and field offsets, by C field name.
type goLayout struct {
	name    string
	size    uintptr
	offsets map[string]uintptr
}

// checkLayouts compares Go structs with the C layouts read from the
// pinned layout file: sizes, and the offset of every C field.
func checkLayouts(t *testing.T, want map[string]layout, tests []goLayout) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, ok := want[tt.name]
			if !ok {
				t.Fatalf("%s missing from the layout file", tt.name)
			}
			if tt.size != w.size {
				t.Errorf("size: got %d, want %d", tt.size, w.size)
			}
			for field, off := range w.offsets {
				got, ok := tt.offsets[field]
				if !ok {
					t.Errorf("field %s (offset %d) has no Go counterpart", field, off)
					continue
				}
				if got != off {
					t.Errorf("%s: got offset %d, want %d", field, got, off)
				}
			}
		})
	}
}
