"""`helper-main`: the MAGRPO pair. A helper agent writes auxiliary functions; the main agent
writes the entry function using them; the program is their combination.

The prompts are also what ``corebench train magrpo`` trains the pair on, so a trained pair is
evaluated with exactly the prompts it learned (``--model helper=...,main=...``).
"""

from __future__ import annotations

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render


def helper_prompt(task: Task) -> str:
    return render(__name__, "helper.txt", prompt=task.prompt, entry_point=task.entry_point)


def main_prompt(task: Task, helper_code: str) -> str:
    helpers = helper_code.strip() or "# (the helper wrote no functions)"
    return render(
        __name__, "main.txt", prompt=task.prompt, entry_point=task.entry_point, helpers=helpers
    )


def combine(helper_code: str, main_code: str) -> str:
    """The pair's program: the helper's functions, then the main function."""
    return "\n\n".join(part.strip() for part in (helper_code, main_code) if part.strip()) + "\n"


class HelperMain(System):
    name = "helper-main"
    description = "MAGRPO pair: a helper writes auxiliary functions, the main agent the entry point"
    roles = ("helper", "main")

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        helper_code = ctx.code_from(
            await ctx.generate("helper", helper_prompt(task)), entry_point=False
        )
        ctx.note("helper_code", helper_code)
        main_code = ctx.code_from(await ctx.generate("main", main_prompt(task, helper_code)))
        ctx.note("main_code", main_code)
        if not main_code.strip():
            return ""
        return combine(helper_code, main_code)


@hookimpl
def register_systems(register):
    register(HelperMain)
