"""`self-debug`: one direct call, then the debugging agent repairs the code on the visible
examples (run in the sandbox) for up to ``rounds`` rounds."""

from __future__ import annotations

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render
from corebench.plugins.systems.agents import debug


class SelfDebug(System):
    name = "self-debug"
    description = "direct code, then repairs from the visible examples' results (up to `rounds`)"
    options = {"rounds": 3}

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        code = await ctx.write_code(
            "model",
            render(
                "corebench.plugins.systems.direct",
                "prompt.txt",
                prompt=task.prompt,
                entry_point=task.entry_point,
            ),
        )
        code, _ = await debug(ctx, code, role="model", rounds=self.config["rounds"])
        return code


@hookimpl
def register_systems(register):
    register(SelfDebug)
