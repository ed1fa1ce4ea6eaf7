"""Third-party plugin authors: the example package installed (into a private folder put on
PYTHONPATH, so this environment stays as it was), used end to end through the CLI, its own tests, and
the hook reference in docs/plugins.md kept current."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corebench.harness.plugin_docs import docs_path, refresh

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "corebench-plugin-example"
CLI = [sys.executable, "-m", "corebench.harness.cli"]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict[str, str]:
    """Environment for subprocesses that see the example package (entry points included)."""
    target = tmp_path_factory.mktemp("example-site")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(EXAMPLE)],
        check=True, capture_output=True,
    )  # fmt: skip
    return {**os.environ, "PYTHONPATH": str(target)}


def test_list_shows_the_example_plugins_with_their_distribution(installed):
    out = subprocess.run(
        [*CLI, "list"], capture_output=True, text=True, check=True, env=installed
    ).stdout
    for name in ("strings5", "best-of-n", "replay"):
        line = next(line for line in out.splitlines() if line.strip().startswith(name + " "))
        assert line.endswith("[corebench-plugin-example 0.1.0]")


def test_run_uses_the_example_system_and_backend_on_its_benchmark(installed, tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(
        json.dumps(
            {
                "is_palindrome": "```python\ndef is_palindrome(s):\n    t = [c.lower() for c in s "
                "if c.isalpha()]\n    return t == t[::-1]\n```"
            }
        )
    )
    run_dir = tmp_path / "run"
    proc = subprocess.run(
        [*CLI, "run", "--system", "best-of-n", "--bench", "strings5", "--model", f"replay:{answers}",
         "--out", str(run_dir), "--repeats", "0"],
        capture_output=True, text=True, env=installed,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    shown = json.loads(
        subprocess.check_output([*CLI, "show", str(run_dir), "--json"], env=installed)
    )
    assert shown["tasks"] == 5 and shown["verdicts"] == {"no_code": 4, "passed": 1}


def test_the_example_package_passes_its_own_tests(installed):
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(EXAMPLE / "tests")],
        capture_output=True, text=True, cwd=EXAMPLE, env=installed,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-2000:]


def test_docs_reference_matches_the_code():
    text = docs_path().read_text()
    assert text == refresh(text), "run: python -m corebench.harness.plugin_docs --write"
    for hook in ("register_benchmarks", "register_systems", "register_backends"):
        assert f"`{hook}(register" in text
