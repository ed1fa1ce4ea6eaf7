"""`helper-main`: the MAGRPO pair. A helper agent writes an auxiliary function ``aux``; the main
agent writes the entry function, calling ``aux``; the program is their combination.

By default the two agents work in parallel, as MAGRPO trains them (decentralized execution:
the main agent knows ``aux`` exists but not its code). ``sequential=true`` shows the main agent
the helper's code first. The prompts are the ones ``corebench train magrpo`` trains on, so a
trained pair is evaluated with what it learned (``--model helper=...,main=...``).
"""

from __future__ import annotations

from pydantic import Field

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


def feedback_prompts(task: Task, helper_code: str, main_code: str, feedback: str) -> list[str]:
    """The next turn's prompts, helper's then main's: each agent sees its own last code, the
    helper also its partner's, and the pair's results on the visible examples (as MAGRPO's
    multi-turn training shows them between turns)."""
    fields = {
        "prompt": task.prompt,
        "entry_point": task.entry_point,
        "helper_code": helper_code.strip() or "# (no code)",
        "main_code": main_code.strip() or "# (no code)",
        "feedback": feedback,
    }
    return [
        render(__name__, "helper_feedback.txt", **fields),
        render(__name__, "main_feedback.txt", **fields),
    ]


def combine(helper_code: str, main_code: str) -> str:
    """The pair's program: the helper's functions, then the main function."""
    return "\n\n".join(part.strip() for part in (helper_code, main_code) if part.strip()) + "\n"


class HelperMain(System):
    name = "helper-main"
    description = "MAGRPO pair: a helper writes `aux`, the main agent the entry point calling it"
    roles = ("helper", "main")
    # turns > 1: while the pair's program fails a visible example, both agents rewrite their
    # code from the results (the multi-turn MAGRPO a `turns = N` training run learns)

    class Options(System.Options):
        sequential: bool = Field(False, description="the main agent sees the helper's code")
        turns: int = Field(
            1, ge=1, description="turns: later ones rewrite both codes from the examples' results"
        )

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        if task.entry_point is None:
            raise CorebenchError(
                f"helper-main needs a function task; {task.task_id} is a stdin/stdout program"
            )
        helper_code = await ctx.write_code("helper", helper_prompt(task), entry_point=False)
        shown = helper_code if self.options.sequential else None
        main_code = await ctx.write_code("main", main_prompt(task, shown))
        turns = [{"helper_code": helper_code, "main_code": main_code}]
        for _ in range(1, self.options.turns):
            if not ctx.examples or ctx.calls_left < 2:
                break
            check = await ctx.run_examples(combine(helper_code, main_code))
            turns[-1]["passed_examples"] = check.passed
            if check.passed:
                break
            prompts = feedback_prompts(task, helper_code, main_code, check.feedback)
            helper_code = (
                await ctx.write_code("helper", prompts[0], entry_point=False) or helper_code
            )
            main_code = await ctx.write_code("main", prompts[1]) or main_code
            turns.append({"helper_code": helper_code, "main_code": main_code})
        ctx.note("helper_code", helper_code)
        ctx.note("main_code", main_code)
        if len(turns) > 1:
            ctx.note("turns", turns)
        if not main_code.strip():
            return ""
        return combine(helper_code, main_code)


@hookimpl
def register_systems(register):
    register(HelperMain)
