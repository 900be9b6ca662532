#!/usr/bin/env bash
# llama-cpp-python for the in-process `llama_cpp` backend (cotdyn.generation.backends.llama_cpp),
# built once from its registry sdist into a wheel kept outside the repository, then installed;
# prints the wheel's path.
#
# The source is the `llama-cpp-python` sdist (it vendors llama.cpp): `pip download` is the only
# network step. The build is CPU-only with -march=native (GGML_NATIVE, llama.cpp's default), so the
# wheel stays on the machine that built it; the multimodal library (mtmd/llava) and every
# test, tool, example and server target are left out. A later call finds the wheel in the cache and
# builds nothing. The install is --no-deps: of the package's own dependencies, numpy, jinja2 and
# typing-extensions come from requirements.lock and diskcache is installed here, pinned.
#
# Usage: scripts/llama_cpp_python.sh            -> builds or reuses the wheel, installs it, prints its path
#        LLAMA_CPP_PYTHON_INSTALL=0 scripts/...  -> builds or reuses the wheel only
# Cache: ${COTDYN_CACHE:-~/.cache/cotdyn}/wheels/cpu-<hash of the CPU's flags>/llama_cpp_python-<version>-*.whl
# Jobs:  CMAKE_BUILD_PARALLEL_LEVEL (default: the machine's core count)
set -euo pipefail
version=0.3.36
# -march=native: a wheel fits the CPU that built it, so the cache keeps one per CPU (its flags' hash)
cpu=$(grep -m 1 '^flags' /proc/cpuinfo 2>/dev/null | sha256sum | cut -c 1-12)
cache="${COTDYN_CACHE:-$HOME/.cache/cotdyn}/wheels/cpu-$cpu"
python=${PYTHON:-python3}
wheel=$(ls "$cache"/llama_cpp_python-"$version"-*.whl 2>/dev/null | head -n 1 || true)
if [[ -z "$wheel" ]]; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    # --no-binary names the package alone: its build dependencies (scikit-build-core) stay wheels
    "$python" -m pip download -q --no-deps --no-binary llama-cpp-python \
        "llama-cpp-python==$version" -d "$work" >&2
    export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-$(nproc)}
    export CMAKE_ARGS="-DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
-DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF \
-DGGML_NATIVE=ON ${CMAKE_ARGS:-}"
    "$python" -m pip wheel -q --no-deps "$work/llama_cpp_python-$version.tar.gz" -w "$work/dist" >&2
    mkdir -p "$cache"
    # the copy is renamed into place, so a build killed half-way leaves no wheel that looks finished
    built=$(ls "$work"/dist/llama_cpp_python-"$version"-*.whl)
    cp "$built" "$cache/.partial.whl"
    wheel="$cache/$(basename "$built")"
    mv "$cache/.partial.whl" "$wheel"
fi
if [[ "${LLAMA_CPP_PYTHON_INSTALL:-1}" == 1 ]]; then
    "$python" -m pip install -q --no-deps "$wheel" >&2
    # its other dependencies (numpy, jinja2, typing-extensions) are in requirements.lock; this one, pinned
    "$python" -m pip install -q --no-deps "diskcache==5.6.3" >&2
    "$python" -c "import llama_cpp; print('llama_cpp', llama_cpp.__version__)" >&2
fi
echo "$wheel"
