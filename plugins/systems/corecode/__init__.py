"""`corecode`: CoRe-Code / AlgoForge Planner-Coder.

The Planner writes a structured plan without code (input/output, steps, branches, loops, final
step, complexity); the Coder gets the task and the plan and writes the program. The two roles
may be served by different models (``--model planner=...,coder=...``).

Add-ons (the generalization CoRe-Code claims): ``retrieval=true`` recalls similar solved problems
before planning (the planner sees them); ``debug_rounds=N`` lets the coder repair its code on the
visible examples for up to N rounds.
"""

from __future__ import annotations

from pydantic import Field

from corebench.harness import SolveContext, System, Task, hookimpl
from corebench.harness.prompts import render
from corebench.plugins.systems.agents import debug, recall
from corebench.plugins.systems.corecode.outline import Outline, parse_plan

# the plan ends with its outline's last line ("Complexity: ..."): nothing after it is read
OUTLINE_END = r"(?im)^[^\w\n]*complexity[^\w\n]*\w[^\n]*\n"


class CoReCode(System):
    name = "corecode"
    description = "CoRe-Code planner-coder: a structured plan, then code that follows it"
    roles = ("planner", "coder")

    class Options(System.Options):
        # what each role writes: an outline of six short sections, one code block
        plan_max_new_tokens: int = Field(256, ge=1, description="token budget of the plan")
        code_max_new_tokens: int = Field(384, ge=1, description="token budget of the code")
        retrieval: bool = Field(False, description="recall similar solved problems before planning")
        retrieval_k: int = Field(3, ge=1, description="problems recalled when retrieval is on")
        debug_rounds: int = Field(
            0, ge=0, description="rounds the coder repairs its code on the visible examples"
        )

    async def solve(self, task: Task, ctx: SolveContext) -> str:
        similar = ""
        if self.options.retrieval:
            recalled = await recall(ctx, "planner", self.options.retrieval_k)
            similar = f"Similar problems you know:\n{recalled.as_text()}\n\n"
        plan = await ctx.generate(
            "planner",
            self.role_prompt("planner", task, similar=similar),
            max_new_tokens=self.options.plan_max_new_tokens,
            stop_pattern=OUTLINE_END,
        )
        plan = plan.strip()
        ctx.note("plan", plan)
        ctx.note("plan_outline", parse_plan(plan).as_artifact())  # its sections, and any code
        code = await ctx.write_code(
            "coder",
            self.role_prompt("coder", task, plan=plan),
            max_new_tokens=self.options.code_max_new_tokens,
        )
        if self.options.debug_rounds:
            code, _ = await debug(
                ctx, code, role="coder", rounds=self.options.debug_rounds, plan=plan
            )
        return code

    @classmethod
    def role_prompt(cls, role: str, task: Task, **context: str) -> str:
        """The planner's prompt (``similar``: recalled problems, or none) or the coder's
        (``plan``: the plan it implements)."""
        fields = {"prompt": task.prompt, "entry_point": task.entry_point}
        if role == "planner":
            return render(__name__, "planner.txt", similar=context.get("similar", ""), **fields)
        return render(__name__, "coder.txt", plan=context["plan"], **fields)

    @staticmethod
    def outline(plan: str) -> Outline:
        """What the outline parser finds in a plan: its sections, any code, a quality in [0, 1]
        (the planner reward's ``plan_quality_weight`` term)."""
        return parse_plan(plan)

    @classmethod
    def plan_text(cls, artifacts: dict) -> str | None:
        """The plan, then what the outline parser found: missing sections, lines of code."""
        plan, outline = artifacts.get("plan"), artifacts.get("plan_outline")
        if not isinstance(plan, str) or not isinstance(outline, dict):
            return super().plan_text(artifacts)
        missing = ", ".join(outline.get("missing") or []) or "none"
        code = outline.get("code_lines") or []
        return f"{plan}\n\n[outline: sections missing: {missing}; lines of code: {len(code)}]"


@hookimpl
def register_systems(register):
    register(CoReCode)
