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
        helper_code = await ctx.write_code(
            "helper", self.role_prompt("helper", task), entry_point=False
        )
        shown = {"helper_code": helper_code} if self.options.sequential else {}
        main_code = await ctx.write_code("main", self.role_prompt("main", task, **shown))
        turns = [{"helper_code": helper_code, "main_code": main_code}]
        for _ in range(1, self.options.turns):
            if not ctx.examples or ctx.calls_left < 2:
                break
            check = await ctx.run_examples(self.program(helper_code, main_code))
            turns[-1]["passed_examples"] = check.passed
            if check.passed:
                break
            seen = {"helper_code": helper_code, "main_code": main_code, "feedback": check.feedback}
            helper_code = (
                await ctx.write_code(
                    "helper", self.role_prompt("helper", task, **seen), entry_point=False
                )
                or helper_code
            )
            main_code = (
                await ctx.write_code("main", self.role_prompt("main", task, **seen)) or main_code
            )
            turns.append({"helper_code": helper_code, "main_code": main_code})
        ctx.note("helper_code", helper_code)
        ctx.note("main_code", main_code)
        if len(turns) > 1:
            ctx.note("turns", turns)
        if not main_code.strip():
            return ""
        return self.program(helper_code, main_code)

    @classmethod
    def role_prompt(cls, role: str, task: Task, **context: str) -> str:
        """The helper's or the main agent's prompt. With ``feedback`` (a later turn): each agent
        sees its own last code, the helper also its partner's, and the pair's results on the
        visible examples, as MAGRPO's multi-turn training shows them between turns. Else, with
        ``helper_code`` (sequential mode), the main agent sees the helper's code."""
        fields = {"prompt": task.prompt, "entry_point": task.entry_point}
        if "feedback" in context:
            return render(
                __name__,
                f"{role}_feedback.txt",
                helper_code=context["helper_code"].strip() or "# (no code)",
                main_code=context["main_code"].strip() or "# (no code)",
                feedback=context["feedback"],
                **fields,
            )
        if role == "helper":
            return render(__name__, "helper.txt", **fields)
        if "helper_code" not in context:
            return render(__name__, "main.txt", **fields)
        helpers = context["helper_code"].strip() or "# (the helper wrote no functions)"
        return render(__name__, "main_sees_helper.txt", helpers=helpers, **fields)

    @staticmethod
    def program(helper_code: str, main_code: str) -> str:
        """The pair's program: the helper's functions, then the main function."""
        return "\n\n".join(p.strip() for p in (helper_code, main_code) if p.strip()) + "\n"


@hookimpl
def register_systems(register):
    register(HelperMain)
