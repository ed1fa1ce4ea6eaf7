"""`cot`: Chain-of-Thought. The model reasons step by step, then writes the code.

One call by default (reasoning and code in the same answer); ``two_calls=true`` asks for the
reasoning first and the code in a second call that sees it.
"""

from __future__ import annotations

from pydantic import Field

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render


class ChainOfThought(System):
    name = "cot"
    description = "chain of thought: reason step by step, then code (one call, or two)"

    class Options(System.Options):
        two_calls: bool = Field(
            False, description="reason in one call, then write the code in a second"
        )

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        fields = {"prompt": task.prompt, "entry_point": task.entry_point}
        if not self.options.two_calls:
            answer = await ctx.generate("model", self.role_prompt("model", task))
            return ctx.code_from(answer)
        reasoning = await ctx.generate("model", render(__name__, "reason.txt", **fields))
        ctx.note("reasoning", reasoning.strip())
        return await ctx.write_code(
            "model", render(__name__, "code.txt", reasoning=reasoning.strip(), **fields)
        )

    @classmethod
    def role_prompt(cls, role: str, task: Task, **context: str) -> str:
        """The one-call prompt (reasoning, then code): what plan-then-act training optimises."""
        fields = {"prompt": task.prompt, "entry_point": task.entry_point}
        return render(__name__, "one_call.txt", **fields)


@hookimpl
def register_systems(register):
    register(ChainOfThought)
