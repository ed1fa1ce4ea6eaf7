"""`self-debug`: one direct call, then the debugging agent repairs the code on the visible
examples (run in the sandbox) for up to ``rounds`` rounds."""

from __future__ import annotations

from pydantic import Field

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render
from corebench.plugins.systems.agents import debug


class SelfDebug(System):
    name = "self-debug"
    description = "direct code, then repairs from the visible examples' results (up to `rounds`)"

    class Options(System.Options):
        rounds: int = Field(
            3, ge=0, description="repairs at most, each after a failing example run"
        )

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
        code, _ = await debug(ctx, code, role="model", rounds=self.options.rounds)
        return code


@hookimpl
def register_systems(register):
    register(SelfDebug)
