"""Which type decodes fastest: bfloat16 only where the CPU computes it natively (AVX512-BF16 or
AMX), and every CPU decoder (the backends' ``dtype=auto``, training's rollouts, the prompt
filter) following that one answer."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from corebench.harness.decoding import precision


def cpu_flags() -> set[str]:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/cpuinfo")
def test_native_bfloat16_is_what_the_cpu_flags_say():
    """The kernel's list of this CPU's features is the known answer: avx512_bf16 or amx_tile."""
    native = bool(cpu_flags() & {"avx512_bf16", "amx_tile"})
    assert precision.native_bfloat16("cpu") is native
    assert precision.cpu_dtype() == ("bfloat16" if native else "float32")


@pytest.mark.parametrize(
    "avx512_bf16, amx, expected",
    [(False, False, "float32"), (True, False, "bfloat16"), (False, True, "bfloat16")],
)
def test_cpu_dtype_is_bfloat16_only_where_either_feature_is_there(
    monkeypatch, avx512_bf16, amx, expected
):
    monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
    assert precision.cpu_dtype() == expected


@pytest.mark.parametrize("native", [False, True])
def test_every_cpu_decoder_takes_the_one_answer(monkeypatch, native):
    """The transformers backend's ``dtype=auto`` on the CPU and training's rollouts copy decode
    in ``cpu_dtype()``; an explicit dtype is kept."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from corebench.plugins.backends.transformers_backend import pick_device_and_dtype
    from corebench.training.rollouts import Rollouts

    monkeypatch.setattr(precision, "native_bfloat16", lambda device="cpu": native)
    wanted = torch.bfloat16 if native else torch.float32
    assert pick_device_and_dtype("cpu", "auto") == ("cpu", wanted)
    assert pick_device_and_dtype("cpu", "float32") == ("cpu", torch.float32)

    config = LlamaConfig(vocab_size=40, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, eos_token_id=39)  # fmt: skip
    policy = LlamaForCausalLM(config).eval()
    tokenizer = SimpleNamespace(eos_token_id=39, pad_token_id=0)
    rollouts = Rollouts(policy, tokenizer)
    validation = Rollouts(policy, tokenizer, dtype="float32")
    try:
        assert {p.dtype for p in rollouts.shadow.parameters()} == {wanted}
        assert {p.dtype for p in validation.shadow.parameters()} == {torch.float32}
    finally:
        rollouts.close()
        validation.close()


@pytest.mark.parametrize("native, bf16, noted", [(False, True, True), (True, True, False),
                                                  (False, False, False)])  # fmt: skip
def test_training_in_bf16_on_a_cpu_that_emulates_it_says_so(monkeypatch, capsys, native, bf16,
                                                            noted):  # fmt: skip
    import corebench.training.dispatch as dispatch
    import corebench.training.sft as sft
    from corebench.training.settings import TrainSettings

    monkeypatch.setattr(dispatch, "native_bfloat16", lambda device="cpu": native)
    monkeypatch.setattr(sft, "train_sft", lambda settings: {"model": Path("trained")})
    assert dispatch.train(TrainSettings(method="sft", bf16=bf16)) == {"model": Path("trained")}
    assert (dispatch.EMULATED_BF16 in capsys.readouterr().err) is noted


def test_a_run_decodes_in_one_type_recorded_in_its_folder(monkeypatch, tmp_path):
    """``auto`` takes the CPU's answer and records it; a run continued in that folder keeps it
    when the CPU answers otherwise; an explicit type is taken, and one that contradicts the
    record is refused."""
    from corebench.harness.errors import CorebenchError
    from corebench.training import rollouts
    from corebench.training.settings import TrainSettings

    run = TrainSettings(method="grpo", out=str(tmp_path / "run"))
    monkeypatch.setattr(rollouts, "cpu_dtype", lambda: "bfloat16")
    assert rollouts.rollout_dtype(run) == "bfloat16"
    assert (tmp_path / "run" / rollouts.DTYPE_RECORD).read_text().strip() == "bfloat16"
    monkeypatch.setattr(rollouts, "cpu_dtype", lambda: "float32")  # resumed on another CPU
    assert rollouts.rollout_dtype(run) == "bfloat16"
    assert rollouts.rollout_dtype(run.model_copy(update={"rollout_dtype": "bfloat16"})) == (
        "bfloat16"
    )
    with pytest.raises(CorebenchError, match="decoded in bfloat16, not rollout_dtype = float32"):
        rollouts.rollout_dtype(run.model_copy(update={"rollout_dtype": "float32"}))
    fresh = TrainSettings(method="grpo", out=str(tmp_path / "fresh"))
    assert rollouts.rollout_dtype(fresh) == "float32"
    explicit = TrainSettings(method="grpo", out=str(tmp_path / "x"), rollout_dtype="bfloat16")
    assert rollouts.rollout_dtype(explicit) == "bfloat16"


@pytest.mark.parametrize("native", [False, True])
def test_an_hf_model_says_the_type_it_will_decode_in_before_it_loads(monkeypatch, tmp_path, native):
    """What a run records and compares on resuming (``metadata.provenance_changes``): the
    backend's type is known from its spec and the machine, without loading the weights."""
    from corebench.harness.runner import single_backend

    monkeypatch.setattr(precision, "native_bfloat16", lambda device="cpu": native)
    wanted = "torch.bfloat16" if native else "torch.float32"
    assert single_backend(f"hf:{tmp_path}?device=cpu").identity()["dtype"] == wanted
    assert single_backend(f"hf:{tmp_path}?device=cpu&dtype=float32").identity()["dtype"] == (
        "torch.float32"
    )


def test_a_run_begun_before_the_record_keeps_bfloat16_and_a_bad_record_is_one_error(
    monkeypatch, tmp_path
):
    """Resume states and no record: the run decoded in bfloat16, as every run did before the
    type was a setting, whatever this CPU answers. A record that is neither type is refused."""
    from corebench.harness.errors import CorebenchError
    from corebench.training import rollouts
    from corebench.training.settings import TrainSettings

    monkeypatch.setattr(rollouts, "cpu_dtype", lambda: "float32")
    (tmp_path / "old" / "trainer" / "checkpoint-10").mkdir(parents=True)
    old = TrainSettings(method="grpo", out=str(tmp_path / "old"))
    assert rollouts.rollout_dtype(old) == "bfloat16"
    assert rollouts.recorded_rollout_dtype(old.out) == "bfloat16"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / rollouts.DTYPE_RECORD).write_text("float16\n")
    with pytest.raises(CorebenchError, match="says 'float16', not bfloat16 or float32"):
        rollouts.rollout_dtype(TrainSettings(method="grpo", out=str(tmp_path / "bad")))


def test_a_manifest_records_the_type_rollouts_decoded_in_and_writes_no_record(tmp_path):
    from corebench.training import rollouts
    from corebench.training.data import TrainData
    from corebench.training.manifest import write_manifest
    from corebench.training.settings import TrainSettings

    data = TrainData(source="mbpp:train", tasks=[], validation=[], overlaps=[])
    for name, recorded in (("none", None), ("some", "float32")):
        settings = TrainSettings(method="grpo", out=str(tmp_path / name))
        if recorded:
            (tmp_path / name).mkdir()
            (tmp_path / name / rollouts.DTYPE_RECORD).write_text(recorded + "\n")
        path = write_manifest(tmp_path, settings=settings, role="model", base_model="embedded",
                              data=data, steps=1, reward_curve=[])  # fmt: skip
        assert json.loads(path.read_text())["rollout_dtype"] == recorded
        assert (tmp_path / name / rollouts.DTYPE_RECORD).exists() is bool(recorded)
