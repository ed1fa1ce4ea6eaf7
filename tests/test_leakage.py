"""No hidden test reaches what a model is shown: every system's prompts on every offline
benchmark, debugging feedback and multi-turn feedback included, checked by value
(``leakage.py``), and the check itself shown to find what prompts really show and what is
inserted on purpose."""

from __future__ import annotations

import re

import pytest
from leakage import calls_in, hidden_calls, leaks, shape, written_calls

from corebench.harness import FunctionalSuite, RunConfig
from corebench.harness.registry import default_plugins
from corebench.harness.runner import Runner

RECALL = """## Problem
Description: intersect two lists.
Plan: use sets.
Code: def f(a, b): return set(a) & set(b)
## Problem
Description: common prefix.
Plan: compare characters.
Code: def g(a, b): return a[:1]
"""
SYSTEMS = ["direct", "cot", "corecode", "self-debug", "mapcoder", "helper-main"]
# options that make each system take every feedback path it has
FEEDBACK = {"corecode": {"debug_rounds": 2, "retrieval": True}, "helper-main": {"turns": 2}}
BENCHMARKS = ["mbpp", "humaneval", "mbpp-original"]
# what each system's feedback shows of a program that fails the visible examples
FEEDBACK_PATHS = {s: "failed" for s in ("corecode", "self-debug", "mapcoder", "helper-main")}


def benchmark(name: str, data_dir):
    return default_plugins().benchmarks.get(name).component(data_dir)


def wrong_code(request) -> str:
    """A scripted model: plans, recalls, and a function that returns None (it fails every
    example, so every debugging and feedback round runs)."""
    text = request.messages[-1].content
    if text.startswith("Recall"):
        return RECALL
    name = re.search(r"function `(\w+)`", text)
    if name is None:
        return "a plan"
    return f"```python\ndef {name.group(1)}(*args):\n    return None\n```\n"


@pytest.mark.parametrize("bench", BENCHMARKS)
@pytest.mark.parametrize("system", SYSTEMS)
def test_no_hidden_test_reaches_any_prompt(
    system, bench, tmp_path, data_dir, scripted, plugins_with_scripted
):
    scripted.respond = staticmethod(wrong_code)
    config = RunConfig(
        benchmark=bench,
        system=system,
        model="scripted",
        limit=3,
        system_options=FEEDBACK.get(system, {}),
    )
    runner = Runner(
        config, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted, repeats=0
    )
    runner.run()
    everything = "\n".join(m.content for r in scripted.requests for m in r.messages)
    if system in FEEDBACK_PATHS:  # the feedback path really ran: results of a failing program
        assert FEEDBACK_PATHS[system] in everything, system
    assert leaks_in_prompts(runner, scripted, 3) == {}, system


def leaks_in_prompts(runner: Runner, scripted, count: int) -> dict[str, list[str]]:
    """Per task of the run (its first ``count``), the hidden tests its requests showed: every
    message of every request in which the task's prompt appears (feedback in a later message
    of the same conversation included)."""
    found = {}
    for task in runner.benchmark.tasks()[:count]:
        shown = "\n".join(
            m.content
            for r in scripted.requests
            if any(task.prompt.strip() in m.content for m in r.messages)
            for m in r.messages
        )
        assert shown, f"the task prompt of {task.task_id} was never shown"
        suite = runner.benchmark.test_suite(task.task_id)
        if leaked := leaks(shown, task.prompt, suite):
            found[task.task_id] = leaked
    return found


def test_a_system_that_shows_a_hidden_test_fails_the_check(
    tmp_path, data_dir, scripted, plugins_with_scripted, monkeypatch
):
    import corebench.plugins.systems.direct as direct

    suite = benchmark("mbpp", data_dir).test_suite("Mbpp/2")
    a, b = suite.inputs["plus"][3]
    render = direct.render

    def leaking(*args, **fields):  # a template that quotes one hidden test, reformatted
        return render(*args, **fields) + f"\nFor example similar_elements({list(a)},{list(b)})"

    monkeypatch.setattr(direct, "render", leaking)
    scripted.respond = staticmethod(wrong_code)
    config = RunConfig(benchmark="mbpp", system="direct", model="scripted", tasks=["Mbpp/2"])
    runner = Runner(
        config, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted, repeats=0
    )
    runner.run()
    assert list(leaks_in_prompts(runner, scripted, 1)) == ["Mbpp/2"]


def test_multi_turn_feedback_shows_no_hidden_test(data_dir):
    from corebench.training.magrpo import pair_system
    from corebench.training.rewards import example_feedback

    mbpp = benchmark("mbpp", data_dir)
    tasks = mbpp.tasks()[:5]
    wrong = [f"def {t.entry_point}(*args):\n    return None\n" for t in tasks]
    feedbacks = example_feedback(list(zip(wrong, tasks, strict=True)))
    for task, code, (passed, feedback) in zip(tasks, wrong, feedbacks, strict=True):
        assert not passed and "failed" in feedback  # the feedback path really ran
        seen = {"helper_code": "", "main_code": code, "feedback": feedback}
        shown = "\n".join(pair_system().role_prompt(r, task, **seen) for r in ("helper", "main"))
        assert leaks(shown, task.prompt, mbpp.test_suite(task.task_id)) == [], task.task_id


def test_the_check_finds_the_hidden_test_every_mbpp_prompt_shows(data_dir):
    # each MBPP+ prompt shows one assert, and for all but one task it is one of the hidden tests
    # (the text matching this replaced found 27 of the first 50)
    mbpp = benchmark("mbpp", data_dir)
    missing = []
    for task in mbpp.tasks():
        suite = mbpp.test_suite(task.task_id)
        written = written_calls(task.prompt, suite.entry_point)
        if not set(written) & hidden_calls(suite, {shape(args) for args in written.values()}):
            missing.append(task.task_id)
    assert missing == MBPP_PROMPT_NOT_A_HIDDEN_TEST, missing


# the prompt's assert is no hidden test of these tasks: MBPP+ changed that input (Mbpp/87's
# prompt merges {"R", "B", "P"} with ...; its first hidden test {"R", "P"} with ...)
MBPP_PROMPT_NOT_A_HIDDEN_TEST = ["Mbpp/87"]


def test_an_inserted_hidden_test_is_found_whatever_its_formatting(data_dir):
    mbpp = benchmark("mbpp", data_dir)
    task = mbpp.tasks()[0]  # Mbpp/2, similar_elements(tuple, tuple)
    suite = mbpp.test_suite(task.task_id)
    a, b = suite.inputs["plus"][7]
    assert calls_in(task.prompt, suite.entry_point)  # its own assert, not a leak
    assert leaks(task.prompt, task.prompt, suite) == []
    # the same test as a debugger might echo it: other spacing, lists for tuples, a comma
    written = f"similar_elements ( {list(a)} ,\n  {list(b)}, )"
    prompt = task.prompt + f"\nYour code failed: {written} returned None\n"
    assert len(leaks(prompt, task.prompt, suite)) == 1
    # as the harness describes a failing hidden test
    failure = f"similar_elements failed on input {tuple(suite.inputs['plus'][9])}: got None"
    assert len(leaks(task.prompt + failure, task.prompt, suite)) == 1
    # a call that is no hidden test is not reported
    assert leaks(task.prompt + "\nsimilar_elements((99, 98), (97,))", task.prompt, suite) == []
    # assert-style (expression) tests and stdin tests too
    expr = FunctionalSuite(
        entry_point="",
        reference_code="def f(x):\n    return x\n",
        inputs={"base": [["f({'k': (1, 2.0)})"]]},
        mode="expr",
    )
    assert leaks("try f({ 'k' : [1, 2] })", "", expr) == ['[{"$dict": ["[\\"k\\", [1.0, 2.0]]"]}]']
    stdio = FunctionalSuite(
        entry_point="", reference_code="", inputs={"base": [["3\n1 2 3\n4 5 6\n7 8 9\n"]]},
        mode="stdio",
    )  # fmt: skip
    assert leaks("input:\n3\n1 2  3\n4 5 6 7 8 9", "", stdio) == ["3\n1 2 3\n4 5 6\n7 8 9\n"]
    assert leaks("input:\n3\n1 2 3", "", stdio) == []


def test_every_offline_benchmark_prompt_is_checked(data_dir):
    # the check is only as good as the calls it can read: most prompts of every benchmark show
    # a call of their entry point that parses (HumanEval's docstring examples included)
    for name, least in (("mbpp", 378), ("humaneval", 141), ("mbpp-original", 498)):
        bench = benchmark(name, data_dir)
        readable = 0
        for task in bench.tasks():
            suite = bench.test_suite(task.task_id)
            entry = suite.entry_point or task.entry_point
            readable += bool(calls_in(task.prompt, entry))
        assert readable >= least, (name, readable)
