import pytest

from corebench.harness.errors import CorebenchError
from corebench.harness.modelspec import ModelRef, format_model_spec, parse_model_spec


@pytest.mark.parametrize(
    "spec, expected",
    [
        ("embedded", {"*": ModelRef("embedded")}),
        ("hf:/ckpt/a", {"*": ModelRef("hf", "/ckpt/a")}),
        (
            "openai:qwen@http://127.0.0.1:8000/v1",
            {"*": ModelRef("openai", "qwen@http://127.0.0.1:8000/v1")},
        ),
        (
            "planner=hf:ckpt/p,coder=hf:ckpt/c",
            {"planner": ModelRef("hf", "ckpt/p"), "coder": ModelRef("hf", "ckpt/c")},
        ),
        ("planner=hf:p, *=embedded", {"planner": ModelRef("hf", "p"), "*": ModelRef("embedded")}),
        (
            "vllm:Qwen/Qwen2.5-Coder-7B?tensor_parallel_size=4&dtype=bfloat16",
            {
                "*": ModelRef(
                    "vllm",
                    "Qwen/Qwen2.5-Coder-7B",
                    (("tensor_parallel_size", "4"), ("dtype", "bfloat16")),
                )
            },
        ),
    ],
)
def test_parse(spec, expected):
    assert parse_model_spec(spec) == expected
    assert parse_model_spec(format_model_spec(expected)) == expected


@pytest.mark.parametrize(
    "spec", ["", "planner=hf:a,oops", "planner=hf:a,planner=hf:b", "9bad", "vllm:m?tp"]
)
def test_bad_specs_are_one_clear_error(spec):
    with pytest.raises(CorebenchError):
        parse_model_spec(spec)
