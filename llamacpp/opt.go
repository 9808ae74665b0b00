package llamacpp

// llama.h training (llama_opt_*) and ggml-opt.h datasets: llama.cpp's own
// full-parameter fine-tuning, bound as the yardstick the trainer's speed is
// measured against (train's BenchmarkLlamaOpt). The trainer itself builds
// its graphs from ggml operators and does not use it.

import (
	"errors"
	"fmt"

	"github.com/ebitengine/purego"
)

// cOptParams mirrors struct llama_opt_params (48 bytes, llama.h v0.5.0).
type cOptParams struct {
	nCtxTrain     uint32
	_             [4]byte
	paramFilter   uintptr // llama_opt_param_filter
	paramFilterUD uintptr
	getOptPars    uintptr // ggml_opt_get_optimizer_params
	getOptParsUD  uintptr
	optimizerType int32 // enum ggml_opt_optimizer_type (0: AdamW)
	_             [4]byte
}

var (
	llamaOptInit  func(ctx, model uintptr, p cOptParams)
	llamaOptEpoch func(ctx, dataset, resultTrain, resultEval uintptr, idataSplit int64, cbTrain, cbEval uintptr)
	// ggml_opt_dataset_t ggml_opt_dataset_init(enum ggml_type type_data, enum ggml_type type_label, int64_t ne_datapoint, int64_t ne_label, int64_t ndata, int64_t ndata_shard)
	ggmlOptDatasetInit   func(typeData, typeLabel Type, neDatapoint, neLabel, ndata, ndataShard int64) uintptr
	ggmlOptDatasetFree   func(ds uintptr)
	ggmlOptDatasetData   func(ds uintptr) uintptr
	ggmlOptDatasetLabels func(ds uintptr) uintptr
	ggmlOptResultInit    func() uintptr
	ggmlOptResultFree    func(r uintptr)
	// void ggml_opt_result_loss(ggml_opt_result_t result, double * loss, double * unc)
	ggmlOptResultLoss func(r uintptr, loss, unc *float64)
	// the addresses of the two callbacks llama_opt_params takes
	paramFilterAll, defaultOptimizerParams uintptr
)

func init() {
	register(func(libs libraries) error {
		if err := bindAll(libs.llama, []binding{
			{&llamaOptInit, "llama_opt_init"},
			{&llamaOptEpoch, "llama_opt_epoch"},
		}); err != nil {
			return err
		}
		if err := bindAll(libs.ggmlBase, []binding{
			{&ggmlOptDatasetInit, "ggml_opt_dataset_init"},
			{&ggmlOptDatasetFree, "ggml_opt_dataset_free"},
			{&ggmlOptDatasetData, "ggml_opt_dataset_data"},
			{&ggmlOptDatasetLabels, "ggml_opt_dataset_labels"},
			{&ggmlOptResultInit, "ggml_opt_result_init"},
			{&ggmlOptResultFree, "ggml_opt_result_free"},
			{&ggmlOptResultLoss, "ggml_opt_result_loss"},
		}); err != nil {
			return err
		}
		var err error
		if paramFilterAll, err = purego.Dlsym(libs.llama, "llama_opt_param_filter_all"); err != nil {
			return fmt.Errorf("llamacpp: symbol llama_opt_param_filter_all not found: %v", err)
		}
		if defaultOptimizerParams, err = purego.Dlsym(libs.ggmlBase, "ggml_opt_get_default_optimizer_params"); err != nil {
			return fmt.Errorf("llamacpp: symbol ggml_opt_get_default_optimizer_params not found: %v", err)
		}
		return nil
	})
}

// OptInit prepares c for llama.cpp's full-parameter training of every
// weight of its model with AdamW at ggml's default optimizer parameters
// (llama_opt_init with llama_opt_param_filter_all). The model must hold F32
// weights, be loaded without mmap, and c must have an F32 KV cache, as
// llama.cpp's finetune example requires.
func (c *LlamaContext) OptInit() error {
	if c == nil || c.ptr == 0 || c.model == nil {
		return errors.New("llamacpp: OptInit on a closed context")
	}
	// llama.cpp hands the context's thread count to the CPU backend only
	// when it decodes, and llama_opt_epoch does not: without one decode
	// first, training runs on ggml's default of 4 spinning threads.
	b, err := NewBatch(1, 1)
	if err != nil {
		return err
	}
	defer b.Close()
	if _, err := b.Add(0, 0, 0, true); err != nil {
		return err
	}
	if err := c.Decode(b); err != nil {
		return fmt.Errorf("llamacpp: OptInit: warm-up decode: %w", err)
	}
	c.Memory().Clear(true)
	llamaOptInit(c.ptr, c.model.ptr, cOptParams{paramFilter: paramFilterAll, getOptPars: defaultOptimizerParams})
	return nil
}

// OptEpoch trains on windows, each exactly the context's length (NCtx,
// which llama.cpp may have rounded up from the length asked for) of token
// ids (the labels are the next tokens; the last label is the window's own
// last token, which llama.cpp's finetune example also does not predict),
// one optimizer step per physical batch (n_ubatch tokens), and returns the
// mean training loss.
func (c *LlamaContext) OptEpoch(windows [][]int32) (float64, error) {
	nCtx := c.NCtx()
	if len(windows) == 0 {
		return 0, errors.New("llamacpp: OptEpoch without data")
	}
	for i, w := range windows {
		if len(w) != nCtx {
			return 0, fmt.Errorf("llamacpp: window %d has %d tokens, want the context length %d", i, len(w), nCtx)
		}
	}
	ds := ggmlOptDatasetInit(TypeI32, TypeI32, int64(nCtx), int64(nCtx), int64(len(windows)), 1)
	if ds == 0 {
		return 0, errors.New("llamacpp: ggml_opt_dataset_init failed")
	}
	defer ggmlOptDatasetFree(ds)
	data := make([]int32, 0, len(windows)*nCtx)
	labels := make([]int32, 0, len(windows)*nCtx)
	for _, w := range windows {
		data = append(data, w...)
		labels = append(labels, w[1:]...)
		labels = append(labels, w[len(w)-1])
	}
	SetI32(mk(ggmlOptDatasetData(ds)), data)
	SetI32(mk(ggmlOptDatasetLabels(ds)), labels)
	res := ggmlOptResultInit()
	defer ggmlOptResultFree(res)
	eval := ggmlOptResultInit()
	defer ggmlOptResultFree(eval)
	llamaOptEpoch(c.ptr, ds, res, eval, int64(len(windows)), 0, 0)
	var loss, unc float64
	ggmlOptResultLoss(res, &loss, &unc)
	return loss, nil
}
