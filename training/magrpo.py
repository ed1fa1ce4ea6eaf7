"""MAGRPO with comlrl: a helper agent (``aux``) and a main agent trained jointly with one shared
reward on their combined program, group-relative advantages, decentralized execution. The reward
is the MAGRPO authors' (``pair_reward = "authors"``: structure terms, so main must use ``aux``)
or the class study's (``"simple"``: +0.2 parses, +0.3 runs, +0.1 per passed test). The prompts
are the ``helper-main`` system's (parallel mode).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from corebench.harness.errors import CorebenchError
from corebench.harness.extract import extract_code

from .data import load_train_data
from .manifest import write_manifest
from .models import local_checkpoint, pad_outside_prompts
from .rewards import (
    RewardLog,
    authors_pair_reward,
    example_feedback,
    pair_reward,
    pair_shape,
    run_tests,
)
from .settings import EVALUATE_WITH, TrainSettings
from .systems import system

ROLES = ("helper", "main")


def pair_system() -> Any:
    """``helper-main``: the pair is trained on its prompts and judged on its program."""
    return system(EVALUATE_WITH["magrpo"])


def train_magrpo(settings: TrainSettings) -> dict[str, Path]:
    os.environ.setdefault("WANDB_MODE", "disabled")  # comlrl imports wandb
    from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer, set_seed

    data = load_train_data(settings)
    base = local_checkpoint(settings.model)
    out = Path(settings.out)
    tasks = [t for t in data.tasks if t.task.entry_point]  # the pair writes functions
    if not tasks:
        raise CorebenchError(
            f"magrpo trains a helper and a main function; {data.source} has only "
            "stdin/stdout programs (use grpo, pta, corecode or sft)"
        )
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokenizer.padding_side = "left"

    def chat(text: str) -> str:
        return tokenizer.apply_chat_template(
            [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
        )

    replaced_pad = pad_outside_prompts(
        tokenizer, chat(pair_system().role_prompt("main", tasks[0].task))
    )

    # comlrl takes one dataset item per step; cycle through the tasks for `steps` steps
    # ("prompt" names the task: comlrl hands it to the transition between turns)
    items = [{"idx": s % len(tasks), "prompt": str(s % len(tasks))} for s in range(settings.steps)]
    # per step: G joint answers at turn 1, and each branch G more at every later turn
    per_step = sum(settings.num_generations**turn for turn in range(1, settings.turns + 1))
    log = RewardLog(out / "rewards.txt", per_step)
    log.path.unlink(missing_ok=True)
    log.rewards = []

    def reward(helper: list[str], main: list[str], *, batch_items: Any = None) -> list[float]:
        task = tasks[batch_items[0]["idx"]]
        helpers = [extract_code(text, None).code for text in helper]
        mains = [task.code_from(text) for text in main]
        values = [
            pair_system().program(h, m) if m.strip() else ""
            for h, m in zip(helpers, mains, strict=True)
        ]
        runs = run_tests([(code, task) for code in values])
        if settings.pair_reward == "simple":
            rewards = [
                pair_reward(code, run, settings.tests_rewarded)
                for code, run in zip(values, runs, strict=True)
            ]
        else:
            rewards = [
                authors_pair_reward(pair_shape(h, m, task.task.entry_point), code, run)
                for h, m, code, run in zip(helpers, mains, values, runs, strict=True)
            ]
        log.add(rewards)
        return rewards

    set_seed(settings.seed)  # comlrl has no seed setting: sampling and init follow torch's

    def transition(*, prompt: str, agent_completions: list[str], **_: Any) -> list[str]:
        """Between turns: the pair's program on the task's visible examples, fed back to both
        agents in the prompts the `helper-main` system uses for its later turns."""
        task = tasks[int(prompt)]
        helper_code = extract_code(agent_completions[0], None).code
        main_code = task.code_from(agent_completions[1])
        [(_, feedback)] = example_feedback(
            [(pair_system().program(helper_code, main_code), task.task)]
        )
        seen = {"helper_code": helper_code, "main_code": main_code, "feedback": feedback}
        return [pair_system().role_prompt(role, task.task, **seen) for role in ROLES]

    agents = [AutoModelForCausalLM.from_pretrained(base, dtype="float32") for _ in ROLES]
    trainer = MAGRPOTrainer(
        agents=agents,
        num_agents=len(ROLES),
        tokenizer=tokenizer,
        train_dataset=Dataset.from_list(items),
        reward_func=reward,
        formatters=[
            lambda item, external_prompts=None: chat(
                external_prompts or pair_system().role_prompt("helper", tasks[item["idx"]].task)
            ),
            lambda item, external_prompts=None: chat(
                external_prompts or pair_system().role_prompt("main", tasks[item["idx"]].task)
            ),
        ],
        external_transition=transition if settings.turns > 1 else None,
        args=MAGRPOConfig(
            num_turns=settings.turns,
            early_termination_threshold=None,  # every branch gets its H turns
            num_train_epochs=1,
            num_generations=settings.num_generations,
            max_new_tokens=settings.max_completion_length,
            temperature=settings.temperature,
            top_p=1.0,
            agent_learning_rate=settings.learning_rate,
            eval_interval=0,
            logging_steps=1,
        ),
    )
    trainer.train()
    raw = out / "trainer"
    trainer.save_model(str(raw))
    if replaced_pad is not None:
        tokenizer.pad_token = replaced_pad  # checkpoints keep the base model's tokenizer
    checkpoints = {}
    for index, role in enumerate(ROLES):
        final = out / role
        shutil.rmtree(final, ignore_errors=True)
        shutil.move(str(raw / f"agent_{index}"), final)
        tokenizer.save_pretrained(final)
        write_manifest(
            final,
            settings=settings,
            role=role,
            base_model=settings.model,
            data=data,
            steps=len(log.curve()),  # steps taken (each logs its rewards), not asked for
            reward_curve=log.curve(),
            extra={
                "evaluate_with": EVALUATE_WITH["magrpo"],
                "system_options": {"turns": settings.turns},
                "trainer": "comlrl.MAGRPOTrainer",
            },
        )
        checkpoints[role] = final
    return checkpoints
