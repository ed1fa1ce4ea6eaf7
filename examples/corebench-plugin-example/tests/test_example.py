"""The example plugin's own tests: its three components, through corebench."""

from __future__ import annotations

import json

from corebench.harness import RunConfig, Verdict
from corebench.harness.registry import load_plugins
from corebench.harness.runner import Runner
from corebench.harness.store import Store

ANSWERS = {
    "reverse_words": "```python\ndef reverse_words(s):\n    return ' '.join(s.split(' ')[::-1])\n```",
    "count_vowels": "```python\ndef count_vowels(s):\n    return len(s)\n```",  # wrong
}


def test_components_are_registered_from_this_distribution():
    plugins = load_plugins()
    for registry, name in (
        (plugins.benchmarks, "strings5"),
        (plugins.systems, "best-of-n"),
        (plugins.backends, "replay"),
    ):
        assert registry.get(name).origin.distribution == "corebench-plugin-example"


def test_run_end_to_end(tmp_path):
    answers = tmp_path / "answers.json"
    answers.write_text(json.dumps(ANSWERS))
    config = RunConfig(
        benchmark="strings5", system="best-of-n", model=f"replay:{answers}", limit=2,
        system_options={"n": 2},
    )  # fmt: skip
    Runner(config, tmp_path / "run", repeats=0).run()
    results = {s.task_id: (s, r) for s, r in Store(tmp_path / "run", create=False).samples()}
    solution, result = results["strings5/1"]
    assert result.verdict is Verdict.passed and len(solution.trace) == 1
    solution, result = results["strings5/2"]
    assert result.verdict is Verdict.wrong_answer and len(solution.trace) == 2  # retried once
