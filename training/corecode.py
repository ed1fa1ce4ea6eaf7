"""CoRe-Code's collaboration-aware GRPO: the planner and the coder are trained in turn, each
with the other frozen, and each rewarded by how well the pair does.

- Planner phase: a plan's reward is the correctness (``rewards.correctness``: by default the
  share of tests passed, +1 for passing all) of the code the frozen coder writes from it,
  plus ``efficiency_weight`` × that code's speed score when it passes every test, plus
  ``plan_quality_weight`` × the plan's quality (the share of the outline it follows, 0 when it
  holds code: in the spirit of PTA-GRPO's guidance-aware reward, writing the program into the
  plan scores below an honest plan that leads to the same program).
- Coder phase: the frozen planner writes a plan per task (greedy); the coder's reward for its
  code given that plan is its correctness, plus ``efficiency_weight`` × its memory score when it
  passes every test.

CoRe-Code names these terms (time complexity for the planner, memory for the coder) without
public formulas. Ours measure what the evaluation measures: CPU time and peak memory against the
task's reference solution (``rewards.measurement``), scored min(1, reference / program). Start
from SFT checkpoints with ``planner_model`` / ``coder_model``.
"""

from __future__ import annotations

import json
import shutil
import warnings
from pathlib import Path
from typing import Any

from corebench.harness.config import MANIFEST_NAME

from .curriculum import filtered_tasks
from .data import TrainTask, load_train_data
from .distributed import is_main_process, wait_for_everyone
from .grpo import RewardFn, Trained, code_reward, judge, run_grpo
from .manifest import write_manifest
from .models import FrozenModel, local_checkpoint
from .plans import coder_prompt, planner_prompt
from .rewards import correctness, memory_score, speed_score
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system


def planner_reward(settings: TrainSettings, coder: FrozenModel) -> RewardFn:
    def reward(texts: list[str], rows: list[dict[str, Any]]) -> list[float]:
        tasks: list[TrainTask] = [r["task"] for r in rows]
        answers = coder.answer(
            [coder_prompt(t, p.strip()) for t, p in zip(tasks, texts, strict=True)]
        )
        codes = [t.code_from(a) for a, t in zip(answers, tasks, strict=True)]
        runs, bonus = judge(codes, tasks, speed_score, settings.efficiency_weight)
        outline = system(EVALUATE_WITH["corecode"]).outline
        quality = [settings.plan_quality_weight * outline(p).quality for p in texts]
        return [
            correctness(r, settings.reward, settings.tests_rewarded) + b + q
            for r, b, q in zip(runs, bonus, quality, strict=True)
        ]

    return reward


PHASE_RECORD = "phase.json"  # a finished phase's steps, reward curve and diagnostics
CODE_ROLES = ("model", "coder", "helper", "main")  # roles whose checkpoints answer with code


def planner_start_problem(planner: Path) -> str | None:
    """Why a planner's start checkpoint may not plan: a checkpoint corebench trained for a role
    that answers with code (the direct SFT checkpoint, given the planner's prompt, wrote a code
    block in 24 of 24 completions: ``measurements/plans_written.py``), so that its planner
    phase would train a second coder."""
    manifest = planner / MANIFEST_NAME
    if not manifest.exists():
        return None
    trained = json.loads(manifest.read_text())
    if trained.get("role") not in CODE_ROLES:
        return None
    return (
        f"the planner starts from {planner}, a {trained.get('method')} checkpoint of the "
        f"{trained['role']!r} role, "
        "which answers with code rather than a plan; CoRe-Code cold-starts the planner on plans "
        "(corebench train sft --set 'sft_roles=[\"planner\"]', then planner_model=hf:OUT/planner)"
    )


def _phase_done(out: Path) -> Trained | None:
    """A phase finished by an earlier (interrupted) run."""
    model, record = out / "model", out / PHASE_RECORD
    if not ((model / "config.json").exists() and record.exists()):
        return None
    done = json.loads(record.read_text())
    return Trained(model, done["reward_curve"], done["steps"], done.get("diagnostics", {}))


def _phase(settings: TrainSettings, out: Path, **grpo: Any) -> Trained:
    trained = run_grpo(settings, out=out, **grpo)
    if is_main_process():
        record = {
            "steps": trained.steps,
            "reward_curve": trained.curve,
            "diagnostics": trained.diagnostics,
        }
        (out / PHASE_RECORD).write_text(json.dumps(record))
    wait_for_everyone()
    return trained


def train_corecode(settings: TrainSettings) -> dict[str, Path]:
    planner = local_checkpoint(settings.planner_model or settings.model)
    coder = local_checkpoint(settings.coder_model or settings.model)
    if problem := planner_start_problem(planner):
        warnings.warn(problem, stacklevel=2)
    # the filter asks the coder's start checkpoint (the one that writes code) directly
    data = filtered_tasks(coder, load_train_data(settings), settings)
    out = Path(settings.out)
    curves: dict[str, list[dict[str, float]]] = {"planner": [], "coder": []}
    steps = {"planner": 0, "coder": 0}
    phases: list[dict[str, Any]] = []  # every phase, in order (both roles' manifests list them)
    for round_index in range(1, settings.rounds + 1):
        phase = out / f"round{round_index}"
        # planner phase, coder frozen (a phase an interrupted run finished is not redone, and
        # its curve and steps still count)
        done = _phase_done(phase / "planner")
        if done is None:
            frozen = FrozenModel(coder, settings.max_completion_length)
            try:
                rows, held = ([{"prompt": planner_prompt(t), "task": t} for t in tasks]
                              for tasks in (data.tasks, data.validation))  # fmt: skip
                done = _phase(
                    settings, phase / "planner", model_path=planner, rows=rows,
                    reward=planner_reward(settings, frozen), validation_rows=held,
                )  # fmt: skip
            finally:
                frozen.close()
        planner = done.model
        curves["planner"] += done.curve
        steps["planner"] += done.steps
        phases.append(_phase_entry(round_index, "planner", done))
        # coder phase, planner frozen: its plans are fixed for the phase
        done = _phase_done(phase / "coder")
        if done is None:
            frozen = FrozenModel(planner, settings.max_completion_length)
            everything = data.tasks + data.validation
            try:
                plans = frozen.answer([planner_prompt(t) for t in everything])
            finally:
                frozen.close()
            planned = [
                {"prompt": coder_prompt(t, p.strip()), "task": t}
                for t, p in zip(everything, plans, strict=True)
            ]
            done = _phase(
                settings, phase / "coder", model_path=coder, rows=planned[: len(data.tasks)],
                reward=code_reward(settings, memory_score),
                validation_rows=planned[len(data.tasks) :],
            )  # fmt: skip
        coder = done.model
        curves["coder"] += done.curve
        steps["coder"] += done.steps
        phases.append(_phase_entry(round_index, "coder", done))
    checkpoints = {role: out / role for role in ("planner", "coder")}
    if not is_main_process():  # the main process copies the checkpoints and writes manifests
        return checkpoints
    for role, path in (("planner", planner), ("coder", coder)):
        final = out / role
        if final.resolve() != path.resolve():
            shutil.rmtree(final, ignore_errors=True)
            shutil.copytree(path, final)
        write_manifest(
            final,
            settings=settings,
            role=role,
            base_model=(settings.planner_model if role == "planner" else settings.coder_model)
            or settings.model,
            data=data,
            steps=steps[role],
            reward_curve=curves[role],
            extra={
                "evaluate_with": EVALUATE_WITH["corecode"],
                "rounds": settings.rounds,
                "phases": phases,
                # the role's last phase (each phase's own are in `phases`)
                "diagnostics": [p for p in phases if p["role"] == role][-1]["diagnostics"],
            },
        )
    return checkpoints


def _phase_entry(round_index: int, role: str, done: Trained) -> dict[str, Any]:
    return {
        "round": round_index,
        "role": role,
        "steps": done.steps,
        "reward_curve": done.curve,
        "diagnostics": done.diagnostics,
    }
