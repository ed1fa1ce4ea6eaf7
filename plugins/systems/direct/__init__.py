"""`direct`: one call with the task prompt; the code is extracted from the answer."""

from __future__ import annotations

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render


class Direct(System):
    name = "direct"
    description = "single model, one call: the task prompt in, code out"

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        return await ctx.write_code("model", self.role_prompt("model", task))

    @classmethod
    def role_prompt(cls, role: str, task: Task, **context: str) -> str:
        return render(__name__, "prompt.txt", prompt=task.prompt, entry_point=task.entry_point)


@hookimpl
def register_systems(register):
    register(Direct)
