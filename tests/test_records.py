from corebench.harness import (
    ExecutionResult,
    Message,
    ModelCall,
    RunConfig,
    Solution,
    Task,
    TestOutcome,
    Verdict,
)


def test_records_round_trip_through_json():
    call = ModelCall(
        role="planner", model="embedded:x", messages=[Message(role="user", content="plan it")],
        completion="1. loop", prompt_tokens=12, completion_tokens=3, finish_reason="stop", latency_s=0.5,
    )  # fmt: skip
    records = [
        Task(
            task_id="Mbpp/2",
            benchmark="mbpp",
            prompt="p",
            entry_point="f",
            examples=["assert f(1) == 2"],
        ),
        Solution(
            task_id="Mbpp/2",
            sample_index=3,
            code="def f(x):\n    return x",
            trace=[call],
            artifacts={"plan": "1. loop"},
        ),
        ExecutionResult(
            task_id="Mbpp/2",
            sample_index=3,
            verdict=Verdict.wrong_answer,
            suite_verdicts={"base": Verdict.passed, "plus": Verdict.wrong_answer},
            tests=[
                TestOutcome(
                    suite="plus", index=4, verdict=Verdict.wrong_answer, detail="input (1,)"
                )
            ],
            runtime_s=0.25,
            peak_memory_bytes=4096,
        ),  # fmt: skip
        RunConfig(
            benchmark="mbpp",
            system="corecode",
            model="planner=hf:a,coder=hf:b",
            k=[1, 5],
            n=5,
            temperature=0.8,
        ),
    ]
    for record in records:
        again = type(record).model_validate_json(record.model_dump_json())
        assert again == record
    solution = records[1]
    assert solution.prompt_tokens == 12 and solution.completion_tokens == 3


def test_run_identity_ignores_k_only():
    a = RunConfig(benchmark="mbpp", system="direct", model="embedded", k=[1])
    assert a.identity() == a.model_copy(update={"k": [1, 10]}).identity()
    assert a.identity() != a.model_copy(update={"seed": 1}).identity()
