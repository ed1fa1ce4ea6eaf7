"""`mapcoder`: MapCoder's four agents (Islam et al., ACL 2024).

1. Retrieval: one call; the model recalls ``k`` similar problems (with plans) and an algorithm.
2. Planning: per exemplar, a plan for this task, then a separate call rating it 0-100.
3. Coding: plans in confidence order; each plan's code runs on the *visible* examples.
4. Debugging: on failure, up to ``t`` repair rounds for that plan; the first code that passes the
   examples is the answer, else the last code written. A task without visible examples gets the
   highest-confidence plan's code (no later plan could be shown better).

Worst case ``1 + 2k + k(1 + t)`` calls; ``max_calls`` (and the run's per-sample budget) stop it
early with the best code so far. Unlike the published code, the examples are only those the
prompt shows: no hidden test is used as a "sample" test.
"""

from __future__ import annotations

import re

from pydantic import Field

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render
from corebench.plugins.systems.agents import debug, examples_text, recall

_CONFIDENCE = re.compile(r"confidence\D{0,20}?(\d{1,3})", re.IGNORECASE)


def parse_confidence(answer: str) -> int:
    """The 0-100 score in a confidence answer (0 when none is given)."""
    match = _CONFIDENCE.search(answer) or re.search(r"\b(\d{1,3})\b", answer)
    return min(100, int(match.group(1))) if match else 0


class MapCoder(System):
    name = "mapcoder"
    description = "MapCoder: recall k exemplars, plan with confidence, code, debug t rounds"

    class Options(System.Options):
        k: int = Field(3, ge=1, description="exemplars recalled, each with its own plan")
        t: int = Field(5, ge=0, description="debugging rounds per plan")
        max_calls: int = Field(
            0, ge=0, description="model calls per sample (0: only the run's per-sample budget)"
        )

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        k, t = self.options.k, self.options.t
        cap = self.options.max_calls or ctx.limits.max_calls

        def can_call() -> bool:
            return ctx.calls_left > 0 and len(ctx.trace) < cap

        fields = {
            "prompt": task.prompt,
            "entry_point": task.entry_point,
            "examples": examples_text(ctx) or "(none given)",
        }
        recalled = await recall(ctx, "model", k)
        plans: list[dict] = []
        for exemplar in recalled.exemplars:
            if not can_call():
                break
            plan = await ctx.generate(
                "model",
                render(
                    __name__,
                    "plan.txt",
                    exemplar=exemplar,
                    tutorial=recalled.tutorial or "(none)",
                    **fields,
                ),
            )
            confidence = 0
            if can_call():
                rating = await ctx.generate(
                    "model", render(__name__, "confidence.txt", plan=plan.strip(), **fields)
                )
                confidence = parse_confidence(rating)
            plans.append({"plan": plan.strip(), "confidence": confidence})
        plans.sort(key=lambda p: -p["confidence"])  # stable: recall order breaks ties
        ctx.note("plans", plans)

        code = ""
        for entry in plans:
            if not can_call():
                break
            code = (
                await ctx.write_code(
                    "model", render(__name__, "code.txt", plan=entry["plan"], **fields)
                )
                or code
            )
            if not ctx.examples:  # nothing can tell the plans apart: the most confident one's code
                break
            rounds = min(t, max(0, cap - len(ctx.trace)))
            code, passed = await debug(ctx, code, role="model", rounds=rounds, plan=entry["plan"])
            entry["passed_examples"] = passed
            if passed:
                break
        return code

    @classmethod
    def plan_text(cls, artifacts: dict) -> str | None:
        """Every plan, in the confidence order MapCoder coded them."""
        plans = artifacts.get("plans")
        if not plans:
            return None
        recalled = artifacts.get("recalled") or {}
        head = (
            f"[exemplars recalled: {recalled['parsed']} of {recalled['asked']}]\n\n"
            if "parsed" in recalled
            else ""
        )
        return head + "\n\n".join(f"(confidence {p['confidence']}) {p['plan']}" for p in plans)


@hookimpl
def register_systems(register):
    register(MapCoder)
