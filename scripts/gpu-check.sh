#!/usr/bin/env bash
# gpu-check.sh [OUT_DIR] — measure omar's GPU path against the CPU in one
# run, designed for under 8 minutes on one H100, and write every output and
# a summary (summary.md) into OUT_DIR (default: $OUT).
#
# With a CUDA device (nvidia-smi lists one), after installing the CUDA
# flavour of the llama.cpp libraries (scripts/install-llama.sh cuda):
#   - omar bench decode, all layers offloaded, against the raw llama_decode
#     loop at 1, 8, 32 and 128 sequences;
#   - omar bench train --device cuda --compare cpu: the CUDA trainer against
#     the CPU trainer (2 threads: the CPU machine's cores) on the same F32
#     model and sequences: the largest differences of logprobs, values, loss
#     and gradient norm, and the PPO step time of both;
#   - a PPO step's time on the GPU at the tiny and small presets and the
#     largest generated shape (qwen3-0.6b, when `omar model init -h` lists
#     --shape; skipped, saying so, otherwise);
#   - a short omar selfplay with rollout.gpu_layers: -1 and train.device:
#     cuda, its seconds per phase;
#   - nvidia-smi before and after.
# Without one (no nvidia-smi, or no device), it says so, skips what needs
# CUDA and runs the CPU half: bench decode against the raw loop at small
# sizes, the CPU trainer's step time on tiny and small, the CPU trainer
# compared with itself (a self-check of the comparison: every difference
# must be 0), and a tiny selfplay.
#
# Every step runs under timeout, and the whole under a budget; a failed or
# timed-out step is recorded and the script goes on. Exit status: 0 when no
# step failed and no bar failed, 1 otherwise, 2 for bad usage.
#
# Environment:
#   GPU_CHECK_DEVICE  auto (default), cpu (CPU half only) or cuda (fail the
#                     CUDA steps rather than skip them when none is found)
#   GPU_CHECK_QUICK   1: the CPU half at the smallest sizes (the test in
#                     make test runs this: well under a minute)
#   GPU_CHECK_BUDGET  seconds for all steps (default 450)
#   OMAR_BIN          the omar binary (default: build ./cmd/omar with go)
#   OMAR_LLAMA_LIB    CPU mode's library directory (default lib/llama/cpu);
#                     CUDA mode uses lib/llama/cuda
set -uo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="${1:-${OUT:-}}"
if [[ -z "$out" ]]; then
	echo "usage: gpu-check.sh OUT_DIR (or set OUT)" >&2
	exit 2
fi
mkdir -p "$out" || exit 2
out="$(cd "$out" && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

mode="${GPU_CHECK_DEVICE:-auto}"
quick="${GPU_CHECK_QUICK:-0}"
budget="${GPU_CHECK_BUDGET:-450}"
case "$mode" in auto | cpu | cuda) ;; *)
	echo "gpu-check.sh: GPU_CHECK_DEVICE=$mode: want auto, cpu or cuda" >&2
	exit 2
	;;
esac
started=$(date +%s)
steps_tsv="$out/steps.tsv"

say() { echo "gpu-check: $*" >&2; }

# record NAME STATUS SECONDS NOTE — one row of steps.tsv.
record() {
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$1.txt" "$4" >>"$steps_tsv"
}

# skip NAME REASON — a step not run, saying why.
skip() {
	echo "skipped: $2" >"$out/$1.txt"
	record "$1" skipped 0 "$2"
	say "$1: skipped: $2"
}

# step NAME LIMIT CMD... — run CMD under timeout (LIMIT seconds, less when
# the budget has less left), its stdout and stderr in NAME.txt. Returns
# CMD's status (124 on timeout).
step() {
	local name=$1 limit=$2
	shift 2
	local left=$((budget - ($(date +%s) - started)))
	if ((left < 5)); then
		skip "$name" "the budget of ${budget}s is spent"
		return 1
	fi
	((limit > left)) && limit=$left
	say "$name (at most ${limit}s): $*"
	local t0 rc
	t0=$(date +%s)
	timeout --kill-after=10 "$limit" "$@" >"$out/$name.txt" 2>&1
	rc=$?
	local secs=$(($(date +%s) - t0))
	if ((rc == 124 || rc == 137)); then
		echo "gpu-check: timed out after ${limit}s" >>"$out/$name.txt"
		record "$name" timeout "$secs" "no result within ${limit}s"
		say "$name: timed out after ${limit}s"
	elif ((rc != 0)); then
		record "$name" failed "$secs" "exit status $rc: $(tail -n 1 "$out/$name.txt" | tr '\t' ' ' | cut -c1-200)"
		say "$name: failed (exit $rc), see $out/$name.txt"
	else
		record "$name" ok "$secs" ""
	fi
	return $rc
}

# jget KEY FILE — a number from omar's one-line JSON (flat keys).
jget() { grep -o "\"$1\":[^,}]*" "$2" 2>/dev/null | head -n 1 | cut -d: -f2; }

# ratio_at P FILE — bench decode's backend/raw ratio at P sequences.
ratio_at() { awk -v p="$1" '$1 == p { print $4 }' "$2" 2>/dev/null; }

# le A B — A ≤ B as numbers (false when either is empty).
le() { [[ -n "$1" && -n "$2" ]] && awk -v a="$1" -v b="$2" 'BEGIN { exit !(a + 0 <= b + 0) }'; }

# summarize — summary.md from the outputs in $out and the run's state:
# the GPU check's bars, PASS/FAIL/SKIPPED with their numbers. Exit status of
# the run: 1 when a step or a bar failed.
summarize() {
	bars_failed=0
	# A device whose libraries do not work fails the bars; no device skips them.
	no_cuda_bar=SKIPPED
	((cuda_broken)) && no_cuda_bar=FAIL
	bar() { # NAME STATUS TEXT
		echo "- $1: $2 — $3"
		[[ "$2" == FAIL ]] && bars_failed=1
		return 0
	}
	{
		echo "# gpu-check summary"
		echo
		echo "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
		echo "- commit: $commit"
		if ((cuda || cuda_broken)); then
			echo "- mode: CUDA — $gpu_name"
		else
			echo "- mode: CPU only — $why_cpu"
		fi
		echo "- quick: $quick; budget ${budget}s, used ${used}s"
		echo
		echo "## Bars"
		echo
		f="$out/train-parity-small.txt"
		lp=$(jget max_diff_logprobs "$f")
		if ((!cuda)); then
			bar cuda-logprobs-f32 "$no_cuda_bar" "$cuda_skip"
		elif [[ -z "$lp" ]]; then
			bar cuda-logprobs-f32 FAIL "no result (see train-parity-small.txt)"
		else
			lpa=$(jget max_diff_logprobs_after_step "$f")
			st=FAIL
			le "$lp" 1e-3 && le "$lpa" 1e-3 && st=PASS
			bar cuda-logprobs-f32 $st "max |Δ| CUDA − CPU on the F32 small model: logprobs $lp, after one update $lpa (want ≤ 1e-3); reference logprobs $(jget max_diff_ref_logprobs "$f"), values after the update $(jget max_diff_values_after_step "$f"), loss $(jget max_diff_loss "$f"), gradient norm $(jget max_diff_grad_norm "$f")"
		fi
		f="$out/decode-gpu.txt"
		r32=$(ratio_at 32 "$f")
		if ((!cuda)); then
			p=32
			((quick)) && p=4
			bar rollout-32-vs-raw "$no_cuda_bar" "$cuda_skip; on the CPU (tiny model): backend/raw $(ratio_at 1 "$out/decode-cpu.txt") at 1 sequence, $(ratio_at $p "$out/decode-cpu.txt") at $p"
		elif [[ -z "$r32" ]]; then
			bar rollout-32-vs-raw FAIL "no result at 32 sequences (see decode-gpu.txt)"
		else
			st=FAIL
			le 0.9 "$r32" && st=PASS
			bar rollout-32-vs-raw $st "backend/raw tokens/s at 32 sequences, all layers on the GPU (small model): $r32 (want ≥ 0.9); at 1, 8, 128: $(ratio_at 1 "$f"), $(ratio_at 8 "$f"), $(ratio_at 128 "$f")"
		fi
		f="$out/train-parity-small.txt"
		sp=$(jget speedup "$f")
		if ((!cuda)); then
			bar ppo-small-gpu-vs-cpu2 "$no_cuda_bar" "$cuda_skip; CPU step on small: $(jget step_ms_median "$out/train-cpu-small.txt") ms ($(jget threads "$out/train-cpu-small.txt") threads, $(jget sequences "$out/train-cpu-small.txt") sequences)"
		elif [[ -z "$sp" ]]; then
			bar ppo-small-gpu-vs-cpu2 FAIL "no result (see train-parity-small.txt)"
		else
			st=FAIL
			le 20 "$sp" && st=PASS
			bar ppo-small-gpu-vs-cpu2 $st "PPO step on the small shape, 8 sequences: GPU $(jget step_ms_median "$f") ms, CPU (2 threads) $(jget compare_step_ms_median "$f") ms: $sp× (want ≥ 20)"
		fi
		f="$out/train-cpu-tiny.txt"
		d=""
		for k in max_diff_logprobs max_diff_ref_logprobs max_diff_loss max_diff_grad_norm max_diff_logprobs_after_step max_diff_values_after_step; do
			d="$d $(jget $k "$f")"
		done
		if [[ -z "${d// /}" ]]; then
			bar cpu-parity-self-check FAIL "no result (see train-cpu-tiny.txt)"
		elif [[ -z "$(echo $d | tr ' ' '\n' | grep -v '^0$')" ]]; then
			bar cpu-parity-self-check PASS "the CPU trainer against itself, tiny model: every difference 0 (logprobs, reference logprobs, loss, gradient norm, logprobs and values after an update:$d)"
		else
			bar cpu-parity-self-check FAIL "the CPU trainer against itself differs:$d (want all 0)"
		fi
		echo
		echo "## PPO step times"
		echo
		for s in train-gpu-tiny train-parity-small train-gpu-qwen3-0.6b train-cpu-tiny train-cpu-small; do
			f="$out/$s.txt"
			ms=$(jget step_ms_median "$f")
			if [[ -n "$ms" ]]; then
				echo "- $s: $(jget device "$f" | tr -d '"') $ms ms median ($(jget tokens_per_s "$f" | cut -d. -f1) tokens/s, $(jget sequences "$f") sequences, $(jget tokens "$f") tokens, $(jget threads "$f") CPU threads)"
			else
				echo "- $s: $(head -n 1 "$f" 2>/dev/null)"
			fi
		done
		echo
		echo "## Self-play seconds per phase"
		echo
		for s in selfplay-gpu selfplay-cpu; do
			if [[ -s "$out/$s.seconds.txt" ]]; then
				sed "s/^/- $s: /" "$out/$s.seconds.txt"
			else
				echo "- $s: $(head -n 1 "$out/$s.txt" 2>/dev/null)"
			fi
		done
		echo
		echo "## Steps"
		echo
		echo '```'
		failed=$(awk -F'\t' 'NR > 1 && ($2 == "failed" || $2 == "timeout") { printf "%s%s", sep, $1; sep = " " }' "$steps_tsv")
		column -t -s $'\t' "$steps_tsv" 2>/dev/null || cat "$steps_tsv"
		echo '```'
		echo
		echo "failed steps: ${failed:-none}"
	} >"$out/summary.md"
	cat "$out/summary.md"
	[[ -z "$failed" ]] && ((!bars_failed))
}

# GPU_CHECK_SUMMARY_ONLY=1: write summary.md again from an earlier run's
# outputs in OUT_DIR (after reading or fixing one by hand).
if [[ "${GPU_CHECK_SUMMARY_ONLY:-0}" == 1 ]]; then
	if [[ ! -f "$out/state.env" || ! -f "$steps_tsv" ]]; then
		echo "gpu-check.sh: $out holds no earlier run (state.env, steps.tsv)" >&2
		exit 2
	fi
	# shellcheck source=/dev/null
	source "$out/state.env"
	summarize
	exit
fi
printf 'step\tstatus\tseconds\toutput\tnote\n' >"$steps_tsv"
export OMAR_LLAMA_LIB="${OMAR_LLAMA_LIB:-$root/lib/llama/cpu}"
# The code measured: the commit at the start, and whether the tree differed.
commit=$(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown)
if [[ "$commit" != unknown ]] && ! git -C "$root" diff --quiet HEAD -- 2>/dev/null; then
	commit="$commit with uncommitted changes"
fi

# CUDA: a device, unless told to stay on the CPU.
cuda=0
cuda_broken=0
why_cpu=""
cuda_skip=""
gpu_name=""
if [[ "$mode" == cpu ]]; then
	why_cpu="GPU_CHECK_DEVICE=cpu"
elif ! command -v nvidia-smi >/dev/null 2>&1; then
	why_cpu="no nvidia-smi on this machine"
elif ! nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then
	why_cpu="nvidia-smi lists no device"
else
	cuda=1
	gpu_name=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
fi
if ((cuda == 0)); then
	say "CPU only: $why_cpu; the steps that need CUDA are skipped"
	cuda_skip="needs a CUDA device ($why_cpu)"
	# Told to expect one: its absence fails the bars.
	[[ "$mode" == cuda ]] && cuda_broken=1
fi

if ((cuda)); then
	step nvidia-smi.before 30 nvidia-smi
else
	skip nvidia-smi.before "$cuda_skip"
fi

# The libraries and the binary.
# Without usable CUDA libraries the CUDA steps would run on the CPU
# libraries' CPU backend and measure the wrong thing: they are skipped
# (and the bars fail for want of a result).
if ((cuda)); then
	cudalib="$root/lib/llama/cuda"
	if step install-cuda-libs 240 bash "$root/scripts/install-llama.sh" cuda; then
		# The prebuilt CUDA backend needs the CUDA 13 runtime and the
		# driver; ggml would skip it quietly, leaving only the CPU.
		step cuda-runtime 30 bash -c 'shopt -s nullglob; libs=("$1"/libggml-cuda*.so); if ((${#libs[@]} == 0)); then echo "no libggml-cuda*.so in $1"; exit 1; fi; ldd "${libs[@]}"; if ldd "${libs[@]}" | grep -q "not found"; then echo "the CUDA backend cannot load: $(ldd "${libs[@]}" | grep "not found" | tr -s " \t\n" " ")"; exit 1; fi' _ "$cudalib" ||
			cuda_skip="the CUDA backend cannot load (see cuda-runtime.txt)"
	else
		cuda_skip="the CUDA libraries did not install (see install-cuda-libs.txt)"
	fi
	if [[ -n "$cuda_skip" ]]; then
		cuda=0
		cuda_broken=1
	else
		# Both halves then run on these libraries (they carry the CPU
		# backends too), so the CPU side of a comparison is the same build.
		export OMAR_LLAMA_LIB="$cudalib"
	fi
fi
omar="${OMAR_BIN:-}"
if [[ -z "$omar" ]]; then
	omar="$work/omar"
	step build 300 go -C "$root" build -o "$omar" ./cmd/omar
else
	skip build "OMAR_BIN=$omar"
fi
if [[ ! -x "$omar" ]] && ! command -v "$omar" >/dev/null 2>&1; then
	say "no omar binary: nothing else can run"
fi

# Models: random F32 models of the presets, and the real-model shape when
# this build can generate it.
step model-tiny 60 "$omar" model init --preset tiny --seed 1 --out "$work/tiny.gguf"
step model-small 120 "$omar" model init --preset small --seed 1 --out "$work/small.gguf"
big=""
if ((cuda)); then
	if "$omar" model init -h 2>&1 | grep -q -- '-shape'; then
		step model-qwen3-0.6b 240 "$omar" model init --shape qwen3-0.6b --seed 1 --out "$work/qwen3-0.6b.gguf" && big="$work/qwen3-0.6b.gguf"
	else
		skip model-qwen3-0.6b "this build's omar model init has no --shape (the generated shapes are its presets)"
	fi
else
	skip model-qwen3-0.6b "$cuda_skip"
fi

# Rollout throughput: the backend against the raw llama_decode loop.
if ((cuda)); then
	step decode-gpu 180 "$omar" bench decode --model "$work/small.gguf" --gpu-layers -1 --parallel 1,8,32,128 -n 128
	if [[ -n "$big" ]]; then
		step decode-gpu-qwen3-0.6b 180 "$omar" bench decode --model "$big" --gpu-layers -1 --parallel 1,8,32,128 -n 128
	else
		skip decode-gpu-qwen3-0.6b "no qwen3-0.6b model (see model-qwen3-0.6b)"
	fi
else
	skip decode-gpu "$cuda_skip"
	skip decode-gpu-qwen3-0.6b "$cuda_skip"
fi

# The trainer: CUDA against CPU (2 threads), and step times.
if ((cuda)); then
	step train-parity-small 180 "$omar" bench train --model "$work/small.gguf" --device cuda --compare cpu --threads 2 --seqs 8 --steps 3 --json
	step train-gpu-tiny 60 "$omar" bench train --model "$work/tiny.gguf" --device cuda --seqs 8 --steps 5 --json
	if [[ -n "$big" ]]; then
		step train-gpu-qwen3-0.6b 240 "$omar" bench train --model "$big" --device cuda --seqs 8 --min-len 128 --max-len 256 --steps 3 --json
	else
		skip train-gpu-qwen3-0.6b "no qwen3-0.6b model (see model-qwen3-0.6b)"
	fi
else
	skip train-parity-small "$cuda_skip"
	skip train-gpu-tiny "$cuda_skip"
	skip train-gpu-qwen3-0.6b "$cuda_skip"
fi

# A short self-play run; metrics.jsonl holds its seconds per phase.
selfplay() { # NAME MODEL EPISODES MAX_TOKENS GPU_LAYERS DEVICE THREADS LIMIT
	local name=$1 cfg="$work/$1.yaml"
	cat >"$cfg" <<EOF
iterations: 2
rollout:
  env: sealedbid
  params: {rounds: 1, bidders: 2}
  model: $2
  episodes: $3
  parallel: $3
  max_tokens: $4
  context: 1024
  kv_cache: f32
  threads: $7
  gpu_layers: $5
estimator: rae
league: {enabled: false}
eval: {every: 0}
train:
  device: $6
  threads: $7
  epochs: 1
  minibatch: $3
EOF
	cp "$cfg" "$out/$name.yaml"
	if step "$name" "$8" "$omar" selfplay --config "$cfg" --out "$work/$name" --overwrite; then
		cp "$work/$name/metrics.jsonl" "$out/$name.metrics.jsonl"
		# One line per iteration: its seconds per phase, and the gap
		# between the sampler's and the trainer's logprobs.
		grep -o '"iteration":[0-9]*\|"seconds":{[^}]*}\|"logprob_gap":[^,]*' "$work/$name/metrics.jsonl" | paste -d' ' - - - |
			sed -E 's/"//g; s/seconds:\{/seconds /; s/\}//; s/,/, /g; s/:/ /g' >"$out/$name.seconds.txt"
	fi
}
if ((cuda)); then
	selfplay selfplay-gpu "$work/small.gguf" 16 32 -1 cuda 4 180
else
	skip selfplay-gpu "$cuda_skip"
fi

# The CPU half, last, so that a spent budget costs it rather than the
# GPU's measurements. One thread: ggml's workers spin-wait at every op,
# and on a shared 2-core machine a second thread that finds no free core
# makes a step many times slower (train.Options.Defaults).
if ((quick)); then
	step decode-cpu 60 "$omar" bench decode --model "$work/tiny.gguf" --parallel 1,4 -n 16 --threads 1 --threads-batch 1
else
	step decode-cpu 120 "$omar" bench decode --model "$work/tiny.gguf" --parallel 1,8,32 -n 32 --threads 1 --threads-batch 1
fi
# The CPU trainer against itself: the comparison's self-check.
if ((quick)); then
	step train-cpu-tiny 60 "$omar" bench train --model "$work/tiny.gguf" --device cpu --compare cpu --threads 1 --seqs 2 --min-len 16 --max-len 32 --steps 1 --json
	step train-cpu-small 90 "$omar" bench train --model "$work/small.gguf" --device cpu --threads 1 --seqs 1 --min-len 16 --max-len 32 --steps 1 --json
else
	step train-cpu-tiny 120 "$omar" bench train --model "$work/tiny.gguf" --device cpu --compare cpu --threads 1 --seqs 8 --steps 3 --json
	step train-cpu-small 180 "$omar" bench train --model "$work/small.gguf" --device cpu --threads 1 --seqs 2 --steps 3 --json
fi
if ((quick)); then
	selfplay selfplay-cpu "$work/tiny.gguf" 2 8 0 cpu 1 60
else
	selfplay selfplay-cpu "$work/tiny.gguf" 4 16 0 cpu 1 120
fi

if ((cuda || cuda_broken)); then
	step nvidia-smi.after 30 nvidia-smi
else
	skip nvidia-smi.after "$cuda_skip"
fi

used=$(($(date +%s) - started))
declare -p cuda cuda_broken why_cpu cuda_skip gpu_name quick budget used commit >"$out/state.env"
summarize
