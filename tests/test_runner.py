"""The runner with a scripted backend: control flow, traces, store, resume and errors."""

from __future__ import annotations

import re

import pytest

from corebench.harness import RunConfig, Verdict
from corebench.harness.config import DEFAULT_MAX_BATCH
from corebench.harness.errors import CorebenchError
from corebench.harness.runner import Runner
from corebench.harness.store import Store

MBPP_PLUS_REFERENCES = {
    "similar_elements": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))\n",
    "is_not_prime": "import math\ndef is_not_prime(n):\n    return n < 2 or any(n % i == 0 for i in range(2, int(math.sqrt(n)) + 1))\n",
}


def answer_with_reference(request):
    """Plans for the planner; for the coder a known-correct program when we have one."""
    text = request.messages[-1].content
    if text.startswith("You are the Planner"):
        return "Input/Output: ...\nSteps: 1. compute"
    name = re.search(r"defines the function `(\w+)`", text).group(1)
    code = MBPP_PLUS_REFERENCES.get(name, f"def {name}(*args):\n    return None\n")
    return f"Here you go:\n```python\n{code}```\nDone."


def test_corecode_run_stores_samples_traces_and_resumes(
    tmp_path, data_dir, scripted, plugins_with_scripted
):
    scripted.respond = staticmethod(answer_with_reference)
    config = RunConfig(benchmark="mbpp", system="corecode", model="scripted", limit=3)
    runner = Runner(config, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted)
    outcome = runner.run()
    assert (outcome.total, outcome.completed) == (3, 3)

    store = Store(tmp_path / "run", create=False)
    samples = {s.task_id: (s, r) for s, r in store.samples()}
    assert list(samples) == ["Mbpp/2", "Mbpp/3", "Mbpp/4"]
    solution, result = samples["Mbpp/2"]
    assert [c.role for c in solution.trace] == ["planner", "coder"]
    assert solution.artifacts["plan"].startswith("Input/Output")
    assert (
        "Plan:\nInput/Output" in solution.trace[1].messages[-1].content
    )  # the coder sees the plan
    assert result.verdict is Verdict.passed and samples["Mbpp/3"][1].verdict is Verdict.passed
    assert samples["Mbpp/4"][1].verdict is Verdict.wrong_answer
    # the measurement phase timed the passing solutions (only those) against their references
    assert result.measurement is not None and result.measurement.repeats == 5
    assert result.measurement.runtime_s > 0 and result.measurement.reference_runtime_s > 0
    assert samples["Mbpp/4"][1].measurement is None
    # the three planner calls were batched together (all tasks in flight at once)
    assert max(c.batch_size for s, _ in samples.values() for c in s.trace) == 3

    calls_before = len(scripted.requests)
    again = Runner(config, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
    assert again.completed == 0 and len(scripted.requests) == calls_before
    assert len(list(store.samples())) == 3


def test_the_default_samples_in_flight_fill_a_default_batch(
    tmp_path, data_dir, scripted, plugins_with_scripted
):
    """With the runner's default concurrency a local backend's batches reach its default
    max_batch (fewer samples in flight would leave decode rows empty), and never exceed it."""
    config = RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=40, n=4,
                       temperature=0.6)  # fmt: skip
    Runner(config, tmp_path, data_dir=data_dir, plugins=plugins_with_scripted, repeats=0).run()
    sizes = [c.batch_size for s, _ in Store(tmp_path, create=False).samples() for c in s.trace]
    assert len(sizes) == 160 > DEFAULT_MAX_BATCH
    assert max(sizes) == DEFAULT_MAX_BATCH


def test_a_different_config_in_the_same_directory_is_refused(
    tmp_path, data_dir, scripted, plugins_with_scripted
):
    Runner(
        RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=1),
        tmp_path,
        data_dir=data_dir,
        plugins=plugins_with_scripted,
    ).run()
    other = RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=1, seed=7)
    with pytest.raises(CorebenchError, match="holds a different run.*seed"):
        Runner(other, tmp_path, data_dir=data_dir, plugins=plugins_with_scripted).run()


def test_model_spec_roles_are_checked(tmp_path, data_dir, plugins_with_scripted):
    with pytest.raises(CorebenchError, match="has roles planner, coder"):
        Runner(
            RunConfig(benchmark="mbpp", system="corecode", model="critic=scripted"),
            tmp_path,
            data_dir=data_dir,
            plugins=plugins_with_scripted,
        )
    with pytest.raises(CorebenchError, match="Did you mean 'scripted'"):
        Runner(
            RunConfig(benchmark="mbpp", system="direct", model="scriptd"),
            tmp_path,
            data_dir=data_dir,
            plugins=plugins_with_scripted,
        )


def test_unknown_task_and_missing_data_are_clear_errors(tmp_path, data_dir, plugins_with_scripted):
    runner = Runner(
        RunConfig(benchmark="mbpp", system="direct", model="scripted", tasks=["Mbpp/99999"]),
        tmp_path / "a",
        data_dir=data_dir,
        plugins=plugins_with_scripted,
    )
    with pytest.raises(CorebenchError, match="unknown mbpp task 'Mbpp/99999'"):
        runner.run()
    empty = tmp_path / "empty"
    empty.mkdir()
    runner = Runner(
        RunConfig(benchmark="mbpp", system="direct", model="scripted"),
        tmp_path / "b",
        data_dir=empty,
        plugins=plugins_with_scripted,
    )
    with pytest.raises(CorebenchError, match=r"MbppPlus-v0.2.0.jsonl.gz .*not found in .*empty"):
        runner.run()


def test_resume_refuses_a_changed_dataset_and_keeps_what_is_stored(
    tmp_path, data_dir, scripted, plugins_with_scripted
):
    import gzip
    import shutil

    scripted.respond = staticmethod(answer_with_reference)
    config = RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=2)
    Runner(config, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
    changed = tmp_path / "data"
    changed.mkdir()
    shutil.copy(data_dir / "mbpp.jsonl.gz", changed)
    rows = gzip.decompress((data_dir / "MbppPlus-v0.2.0.jsonl.gz").read_bytes())
    (changed / "MbppPlus-v0.2.0.jsonl.gz").write_bytes(gzip.compress(rows + b"\n"))  # same tasks
    with pytest.raises(CorebenchError, match=r"made with other inputs: the dataset changed"):
        Runner(config, tmp_path / "run", data_dir=changed, plugins=plugins_with_scripted).run()
    assert len(list(Store(tmp_path / "run", create=False).samples())) == 2


def test_resume_refuses_a_model_decoding_in_another_type(
    tmp_path, data_dir, scripted, plugins_with_scripted
):
    """A run begun in bfloat16 (``dtype=auto`` on a CPU that computes it natively) is not
    continued in float32 (the same spec on one that does not): its samples would mix types."""
    scripted.respond = staticmethod(answer_with_reference)
    dtype = {"dtype": "torch.bfloat16"}
    scripted.identity = lambda self: {"backend": "scripted", "target": "", **dtype}
    try:
        first = RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=1)
        Runner(first, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
        store = Store(tmp_path / "run", create=False)
        store.db.execute("DELETE FROM solutions")  # so that resuming needs the model again
        store.db.execute("DELETE FROM results")
        dtype["dtype"] = "torch.float32"
        with pytest.raises(CorebenchError, match=r"decodes in float32 here, the run began in "
                           r"bfloat16 \(dtype=auto resolves by the machine"):  # fmt: skip
            Runner(first, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
        dtype["dtype"] = "torch.bfloat16"  # the type it began in: it continues
        Runner(first, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
        assert len(list(Store(tmp_path / "run", create=False).samples())) == 1
    finally:
        del scripted.identity


def test_resume_refuses_changed_model_weights(tmp_path, data_dir, scripted, plugins_with_scripted):
    scripted.respond = staticmethod(answer_with_reference)
    weights = {"files": {"model.safetensors": "a" * 64}}
    scripted.identity = lambda self: {"backend": "scripted", "target": "", **weights}
    try:
        first = RunConfig(benchmark="mbpp", system="direct", model="scripted", limit=1)
        Runner(first, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
        weights["files"] = {"model.safetensors": "b" * 64}  # retrained at the same path
        store = Store(tmp_path / "run", create=False)
        store.db.execute("DELETE FROM solutions")  # so that resuming needs the model again
        store.db.execute("DELETE FROM results")
        with pytest.raises(CorebenchError, match=r"model weights changed \(files\)"):
            Runner(first, tmp_path / "run", data_dir=data_dir, plugins=plugins_with_scripted).run()
    finally:
        del scripted.identity
