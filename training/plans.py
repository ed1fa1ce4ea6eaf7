"""Plans for SFT cold start, in the CoRe-Code outline (Input/Output, Steps, Branches, Loops, Final
step): from reference solutions by template, or written by any backend (a stronger model through
the OpenAI-compatible backend, for instance)."""

from __future__ import annotations

import ast
import asyncio

from corebench.harness.records import GenerationRequest, Message
from corebench.harness.runner import single_backend

from .data import TrainTask
from .systems import system


def planner_prompt(task: TrainTask) -> str:
    """CoRe-Code's planner prompt (no recalled problems), as the system gives it."""
    return system("corecode").role_prompt("planner", task.task)


def coder_prompt(task: TrainTask, plan: str) -> str:
    return system("corecode").role_prompt("coder", task.task, plan=plan)


def _phrase(node: ast.stmt) -> str:
    """One plan step for a statement, in words around the expressions it uses."""
    text = ast.unparse
    if isinstance(node, ast.Assign):
        return f"set {', '.join(text(t) for t in node.targets)} to {text(node.value)}"
    if isinstance(node, ast.AugAssign):
        return (
            f"update {text(node.target)} with {type(node.op).__name__.lower()} {text(node.value)}"
        )
    if isinstance(node, ast.For):
        return f"repeat for each {text(node.target)} in {text(node.iter)}"
    if isinstance(node, ast.While):
        return f"repeat while {text(node.test)}"
    if isinstance(node, ast.If):
        return f"check whether {text(node.test)}"
    if isinstance(node, ast.Return):
        return f"the result is {text(node.value)}" if node.value is not None else "stop"
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return f"use {', '.join(a.name for a in node.names)}"
    if isinstance(node, ast.Expr):
        return f"evaluate {text(node.value)}"
    return f"do: {text(node).splitlines()[0]}"


def _loop_depth(node: ast.AST, depth: int = 0) -> int:
    """How deeply loops nest inside ``node``."""
    here = depth + isinstance(node, (ast.For, ast.While, ast.comprehension))
    return max([here, *(_loop_depth(c, here) for c in ast.iter_child_nodes(node))])


def template_plan(task: TrainTask) -> str:
    """A plan read off the reference solution's syntax tree, in the outline's words: steps as
    actions on the expressions they use, never statements of code (``outline.code_lines`` finds
    none in it)."""
    try:
        tree = ast.parse(task.reference)
    except SyntaxError:
        return ""
    entry = task.task.entry_point
    fn = next(
        (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == entry), None
    )
    if fn is None:
        return ""
    body = [
        n for n in fn.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))
    ]
    steps = [f"{i}. {_phrase(n)}" for i, n in enumerate(body, 1)]
    branches = [f"- if {ast.unparse(n.test)}" for n in ast.walk(fn) if isinstance(n, ast.If)]
    loops = [
        f"- over {ast.unparse(n.iter)}"
        if isinstance(n, ast.For)
        else f"- while {ast.unparse(n.test)}"
        for n in ast.walk(fn)
        if isinstance(n, (ast.For, ast.While))
    ]
    returns = [ast.unparse(n.value) for n in ast.walk(fn) if isinstance(n, ast.Return) and n.value]
    args = ", ".join(a.arg for a in fn.args.args) or "nothing"
    return "\n".join(
        [
            f"Input/Output: `{entry}` receives {args} and returns "
            + (" or ".join(f"`{r}`" for r in returns[:3]) or "nothing")
            + ".",
            "Steps:",
            *steps,
            "Branches:",
            *(branches or ["- none"]),
            "Loops:",
            *(loops or ["- none"]),
            f"Final step: give back {returns[-1] if returns else 'the result'}.",
            f"Complexity: {_complexity(_loop_depth(fn))}.",
        ]
    )


def _complexity(depth: int) -> str:
    if depth == 0:
        return "a fixed number of steps, constant extra memory"
    power = "n" if depth == 1 else f"n^{depth}"
    return f"about {power} steps for an input of size n (loops nested {depth} deep)"


def model_plans(tasks: list[TrainTask], spec: str, max_new_tokens: int) -> list[str]:
    """Plans written by a model (any backend) from the planner prompt, greedy."""
    backend = single_backend(spec)
    backend.load()

    async def all_plans() -> list[str]:
        requests = [
            GenerationRequest(
                messages=[Message(role="user", content=planner_prompt(t))],
                max_new_tokens=max_new_tokens,
                temperature=0.0,
            )
            for t in tasks
        ]
        return [g.text.strip() for g in await asyncio.gather(*map(backend.generate, requests))]

    try:
        return asyncio.run(all_plans())
    finally:
        backend.close()


def make_plans(tasks: list[TrainTask], source: str, max_new_tokens: int = 256) -> list[str]:
    if source == "template":
        return [template_plan(t) for t in tasks]
    return model_plans(tasks, source, max_new_tokens)
