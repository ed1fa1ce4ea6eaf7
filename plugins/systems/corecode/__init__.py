"""`corecode`: CoRe-Code / AlgoForge Planner-Coder.

The Planner writes a structured plan without code (input/output, steps, branches, loops, final
step, complexity); the Coder gets the task and the plan and writes the program. The two roles
may be served by different models (``--model planner=...,coder=...``).
"""

from __future__ import annotations

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render


class CoReCode(System):
    name = "corecode"
    description = "CoRe-Code planner-coder: a structured plan, then code that follows it"
    roles = ("planner", "coder")
    options = {"plan_max_new_tokens": None}

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        fields = {"prompt": task.prompt, "entry_point": task.entry_point}
        plan = await ctx.generate(
            "planner",
            render(__name__, "planner.txt", **fields),
            max_new_tokens=self.config["plan_max_new_tokens"],
        )
        plan = plan.strip()
        ctx.note("plan", plan)
        answer = await ctx.generate("coder", render(__name__, "coder.txt", plan=plan, **fields))
        return ctx.code_from(answer)


@hookimpl
def register_systems(register):
    register(CoReCode)
