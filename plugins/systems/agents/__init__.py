"""Agents shared by several systems: retrieval (recall similar problems) and debugging.

Both follow MapCoder's design. Retrieval is one call in which the model recalls similar solved
problems itself (no external corpus, so nothing from the benchmark can leak in). Debugging runs
the code on the task's *visible* examples only, in the sandbox, and asks for a repair while any
fails, up to ``rounds`` times.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from corebench.harness import SolveContext
from corebench.harness.prompts import render

# an exemplar starts at a heading line: "## Problem", "Problem 2:", "**Problem 3**",
# "### Exemplar 1: Two Sum", "<problem>"; the rest of such a line is the exemplar's title
_PROBLEM = re.compile(
    r"^[#* \t]*(?:problem|exemplar)(?:[ \t]*\d+[ \t]*\**[ \t]*[:.]?|[ \t]*\**[ \t]*:|[ \t]*\**[ \t]*$)"
    r"\**[ \t]*|^[ \t]*<problem>",
    re.MULTILINE | re.IGNORECASE,
)
_ALGORITHM = re.compile(
    r"^[#* \t]*(?:relevant[ \t]+)?algorithm\b[ \t]*\**[ \t]*:?\**[ \t]*",
    re.MULTILINE | re.IGNORECASE,
)


@dataclass(frozen=True)
class Recalled:
    """What the retrieval agent recalled: exemplar problems (each with its plan) and a tutorial."""

    exemplars: list[str]
    tutorial: str

    def as_text(self) -> str:
        parts = [f"Similar problem {i}:\n{e}" for i, e in enumerate(self.exemplars, 1)]
        if self.tutorial:
            parts.append(f"Relevant algorithm:\n{self.tutorial}")
        return "\n\n".join(parts)


def parse_recall(answer: str, k: int) -> Recalled:
    """Split the retrieval answer into at most ``k`` exemplars and the algorithm tutorial.

    A small model often ignores the outline; then the whole answer is one exemplar.
    """
    tutorial = ""
    algorithm = _ALGORITHM.search(answer)
    if algorithm:
        answer, tutorial = answer[: algorithm.start()], answer[algorithm.end() :].strip()
    pieces = [p.replace("</problem>", "").strip() for p in _PROBLEM.split(answer)]
    exemplars = [p for p in pieces[1:] if p] if len(pieces) > 1 else [answer.strip()]
    return Recalled([e for e in exemplars if e][:k] or [answer.strip()], tutorial)


async def recall(ctx: SolveContext, role: str, k: int) -> Recalled:
    """One call: the model recalls ``k`` similar problems with their plans and code."""
    answer = await ctx.generate(role, render(__name__, "recall.txt", prompt=ctx.task.prompt, k=k))
    recalled = parse_recall(answer, k)
    ctx.note(
        "recalled",
        {
            "asked": k,
            "parsed": len(recalled.exemplars),  # small models often give one, whatever k
            "exemplars": recalled.exemplars,
            "tutorial": recalled.tutorial,
        },
    )
    return recalled


def examples_text(ctx: SolveContext) -> str:
    """The visible examples as a prompt shows them (empty when the task has none)."""
    return "\n".join(e.source for e in ctx.examples)


async def debug(
    ctx: SolveContext, code: str, *, role: str, rounds: int, plan: str | None = None
) -> tuple[str, bool]:
    """Repair ``code`` against the visible examples; returns the last code and whether it passes.

    Each round is kept in the artifacts (``debug``): the feedback the model saw and the code it
    gave back. Without examples nothing is run and the code is returned unchanged.
    """
    if not ctx.examples:
        return code, False
    history = ctx.artifacts.setdefault("debug", [])
    check = await ctx.run_examples(code)
    for round_index in range(rounds):
        if check.passed or ctx.calls_left == 0:
            break
        repaired = await ctx.write_code(
            role,
            render(
                __name__,
                "debug.txt",
                prompt=ctx.task.prompt,
                entry_point=ctx.task.entry_point,
                plan=f"Plan:\n{plan}\n\n" if plan else "",
                code=code,
                feedback=check.feedback,
            ),
        )
        history.append({"round": round_index + 1, "feedback": check.feedback})
        code = repaired or code
        history[-1]["code"] = code
        check = await ctx.run_examples(code)
    return code, check.passed
