"""`helper-main`: the MAGRPO pair. A helper agent writes an auxiliary function ``aux``; the main
agent writes the entry function, calling ``aux``; the program is their combination.

By default the two agents work in parallel, as MAGRPO trains them (decentralized execution:
the main agent knows ``aux`` exists but not its code). ``sequential=true`` shows the main agent
the helper's code first. The prompts are the ones ``corebench train magrpo`` trains on, so a
trained pair is evaluated with what it learned (``--model helper=...,main=...``).
"""

from __future__ import annotations

from corebench.harness import CorebenchError, SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render

HELPER_NAME = "aux"


def helper_prompt(task: Task) -> str:
    return render(__name__, "helper.txt", prompt=task.prompt, entry_point=task.entry_point)


def main_prompt(task: Task, helper_code: str | None = None) -> str:
    """The main agent's prompt; with ``helper_code`` (sequential mode) it shows the helper."""
    fields = {"prompt": task.prompt, "entry_point": task.entry_point}
    if helper_code is None:
        return render(__name__, "main.txt", **fields)
    helpers = helper_code.strip() or "# (the helper wrote no functions)"
    return render(__name__, "main_sees_helper.txt", helpers=helpers, **fields)


def combine(helper_code: str, main_code: str) -> str:
    """The pair's program: the helper's functions, then the main function."""
    return "\n\n".join(part.strip() for part in (helper_code, main_code) if part.strip()) + "\n"


class HelperMain(System):
    name = "helper-main"
    description = "MAGRPO pair: a helper writes `aux`, the main agent the entry point calling it"
    roles = ("helper", "main")
    options = {"sequential": False}

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        if task.entry_point is None:
            raise CorebenchError(
                f"helper-main needs a function task; {task.task_id} is a stdin/stdout program"
            )
        helper_code = await ctx.write_code("helper", helper_prompt(task), entry_point=False)
        ctx.note("helper_code", helper_code)
        shown = helper_code if self.config["sequential"] else None
        main_code = await ctx.write_code("main", main_prompt(task, shown))
        ctx.note("main_code", main_code)
        if not main_code.strip():
            return ""
        return combine(helper_code, main_code)


@hookimpl
def register_systems(register):
    register(HelperMain)
