"""The documentation stays true to the command line: every `corebench` command in a code block of
README.md or docs/*.md is parsed by the real click CLI (subcommands, options, choices, types,
required options) without running it, and its `-O`/`-B` options, `train --set` settings,
component names and model specs are checked as the command would check them. Also: the README
stays short, the README's two commands are the ones CI runs, and no user-facing page refers to
issue numbers."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
import pytest

from corebench.harness import config as C
from corebench.harness.cli import main
from corebench.harness.errors import CorebenchError
from corebench.harness.options import validate_options
from corebench.harness.registry import default_plugins

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
USER_DOCS = [README, *sorted((ROOT / "docs").glob("*.md"))]
# pages that show a third party's components (names no installed plugin registers)
PLUGIN_GUIDES = {"plugins.md", "writing-a-plugin.md"}
README_MAX_LINES = 160

FENCE = re.compile(r"^\s*(?:`{3,}|~{3,})\s*([\w+-]*)")
NOT_SHELL = {"text", "toml", "python", "json", "yaml", "ini"}  # diagrams, outputs, files
MENTIONS_CLI = re.compile(r"(?:^|[\s/;&|(])corebench(?:\s|$)")
SEPARATORS = {"&&", "||", ";", "|"}
ENV_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
ELLIPSES = {"...", "…"}
PLACEHOLDER = re.compile(r"^[A-Z][A-Z0-9_]*$")  # RUN_DIR, SYSTEM, ...


@dataclass(frozen=True)
class Documented:
    path: Path
    line: int
    text: str
    args: tuple[str, ...]  # after `corebench`

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def code_lines(path: Path) -> Iterator[tuple[int, str]]:
    """Lines inside fenced code blocks that may hold shell commands (untagged, bash, console, ...;
    not ``text`` diagrams or files), with their line numbers; a line ending in a backslash is
    joined with the next (shell continuation)."""
    inside, shell, pending, start = False, False, "", 0
    for number, line in enumerate(path.read_text().splitlines(), 1):
        fence = FENCE.match(line)
        if fence:
            inside, pending = not inside, ""
            shell = inside and fence[1].lower() not in NOT_SHELL
            continue
        if not shell:
            continue
        if not pending:
            start = number
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        yield start, pending + line
        pending = ""


def commands_in(text: str) -> list[tuple[str, ...]]:
    """The `corebench` invocations of one shell line (`$ ` prompt, `VAR=value` prefixes, `&&`
    chains and `.venv/bin/corebench` included), each as its arguments; `...` is dropped."""
    text = text.strip().removeprefix("$ ")
    words = shlex.shlex(text, posix=True, punctuation_chars=";&|")
    words.whitespace_split = True
    tokens = list(words)
    found, segment = [], []
    for token in [*tokens, ";"]:
        if token not in SEPARATORS:
            segment.append(token)
            continue
        while segment and ENV_ASSIGNMENT.match(segment[0]):
            segment.pop(0)
        if segment and (segment[0] == "corebench" or segment[0].endswith("/corebench")):
            found.append(tuple(t for t in segment[1:] if t not in ELLIPSES))
        segment = []
    return found


def documented_commands() -> list[Documented]:
    out = []
    for path in USER_DOCS:
        for number, line in code_lines(path):
            if MENTIONS_CLI.search(line.split(" #", 1)[0]):
                out.extend(Documented(path, number, line, args) for args in commands_in(line))
    return out


COMMANDS = documented_commands()


# --- checking one command against the real CLI -----------------------------------------------------
def _lenient(params: list[click.Parameter], settings_file: bool, patch: Callable) -> None:
    """Let the documentation name files that do not exist here (run.toml, samples.jsonl, runs/),
    and let a settings file (`--config`) supply required options; everything else is as strict
    as on the command line."""
    for param in params:
        if isinstance(param.type, click.Path) and param.type.exists:
            patch(param.type, "exists", False)
        if param.callback is not None:
            original = param.callback

            def callback(ctx: Any, p: Any, value: Any, original: Any = original) -> Any:
                if isinstance(value, Path) and not value.exists():
                    return value  # a settings file the example only names
                return original(ctx, p, value)

            patch(param, "callback", callback)
        if settings_file and param.required:
            patch(param, "required", False)


def parse(args: tuple[str, ...], patch: Callable) -> tuple[click.Command, dict[str, Any]]:
    """``corebench ARGS`` parsed by the real command (nothing runs): the command and its
    parameters; a UsageError (unknown command or option, bad choice or type, missing option)
    raises. ``--help`` is accepted (click's Exit)."""
    parent = click.Context(main, info_name="corebench")
    command: click.Command = main
    rest = list(args)
    while isinstance(command, click.Group) and rest and not rest[0].startswith("-"):
        sub = command.get_command(parent, rest[0])
        if sub is None:
            raise click.UsageError(f"no such command {rest[0]!r}")
        if isinstance(sub, click.Group):
            parent = click.Context(sub, info_name=rest[0], parent=parent)
        command, name, rest = sub, rest[0], rest[1:]
    if isinstance(command, click.Group):
        return command, {}  # a group alone, or with --help: its help
    _lenient(command.params, "--config" in rest, patch)
    try:
        ctx = command.make_context(name, rest, parent=parent)
    except click.exceptions.Exit:
        return command, {}
    return command, ctx.params


def check_semantics(command: click.Command, params: dict[str, Any], guide: bool) -> None:
    """What the command itself checks before running: component names (unless the page shows a
    third party's), their options' keys and types, model specs, training settings."""
    from corebench.harness.runner import resolve_models
    from corebench.training.settings import load_settings

    plugins = default_plugins()

    def component(registry: Any, name: str | None) -> Any:
        if not name or PLACEHOLDER.match(name) or (guide and name not in registry):
            return None
        return registry.get(name).component  # unknown: an error with "did you mean"

    if command.name in ("run", "evaluate"):
        bench = component(plugins.benchmarks, params.get("benchmark"))
        if bench is not None and params.get("benchmark_options"):
            validate_options("benchmark option", bench.Options, params["benchmark_options"])
    if command.name == "run":
        system = component(plugins.systems, params.get("system"))
        if system is not None:
            validate_options("system option", system.Options, params.get("system_options") or {})
            resolve_models(params["model"], system, plugins)
    if command.name == "serve" and params.get("model"):
        resolve_models(params["model"], None, plugins)
    if command.name == "train" and params:
        load_settings(params["method"], None, params.get("overrides") or ())
    if command.name == "study" and str(params.get("study_file", "")).startswith("studies/"):
        assert (ROOT / params["study_file"]).exists(), f"no study file {params['study_file']}"


def check(args: tuple[str, ...], patch: Callable, guide: bool = False) -> None:
    command, params = parse(args, patch)
    check_semantics(command, params, guide)


@pytest.fixture
def cli(monkeypatch: pytest.MonkeyPatch) -> Callable:
    """A checker with the CLI's side effects contained: option callbacks set these variables for
    the process, and the isolation check would look for bubblewrap."""
    from corebench.harness.sandbox import isolation

    for name in (C.ENV_ISOLATION, C.ENV_EXECUTOR):
        # set first, so that monkeypatch records it and removes whatever a callback sets later
        # (delenv alone records nothing for an unset variable, which then leaks to later tests)
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.setattr(isolation, "isolation_mode", lambda wanted=None: wanted or "auto")
    return lambda args, guide=False: check(args, monkeypatch.setattr, guide)


@pytest.mark.parametrize("documented", COMMANDS, ids=[c.where for c in COMMANDS])
def test_documented_command_is_accepted_by_the_cli(documented: Documented, cli) -> None:
    try:
        cli(documented.args, documented.path.name in PLUGIN_GUIDES)
    except (click.UsageError, CorebenchError, AssertionError) as exc:
        message = exc.format_message() if isinstance(exc, click.UsageError) else str(exc)
        pytest.fail(f"{documented.where}: {documented.text.strip()}\n  {message}", pytrace=False)


def test_the_documentation_has_commands_of_every_kind() -> None:
    """The collector finds the commands (a broken collector would pass every page)."""
    firsts = {c.args[0] for c in COMMANDS if c.args}
    every = {"run", "evaluate", "show", "leaderboard", "study", "serve", "sandbox", "train"}
    assert every <= firsts
    assert any(c.path == README for c in COMMANDS)


@pytest.mark.parametrize(
    "args",
    [
        ("run", "--system", "direct", "--bench", "mbpp", "--no-such-option"),
        ("run", "--system", "direct"),  # --bench is required
        ("run", "--system", "direct", "--bench", "mbpp", "--isolation", "sometimes"),
        ("run", "--system", "drect", "--bench", "mbpp"),
        ("run", "--system", "mapcoder", "--bench", "mbpp", "-O", "rounds=2"),
        ("run", "--system", "corecode", "--bench", "mbpp", "--model", "helper=hf:a,main=hf:b"),
        ("train", "grpo", "--set", "stepz=3"),
        ("train", "magrpo", "--set", "reward=simple"),
        ("evaluate", "--bench", "mbpp", "--samples", "s.jsonl"),  # --out is required
        ("no-such-command",),
    ],
)
def test_a_wrong_command_is_refused(args: tuple[str, ...], cli) -> None:
    with pytest.raises((click.UsageError, CorebenchError)):
        cli(args)


def test_commands_are_found_in_shell_lines() -> None:
    line = "bash scripts/setup.sh && .venv/bin/corebench run --system corecode --bench mbpp"
    assert commands_in(line) == [("run", "--system", "corecode", "--bench", "mbpp")]
    assert commands_in("$ COREBENCH_ISOLATION=unsafe corebench show RUN_DIR  # note") == [
        ("show", "RUN_DIR")
    ]
    assert commands_in("corebench run --system direct --bench mbpp ...") == [
        ("run", "--system", "direct", "--bench", "mbpp")
    ]


# --- the README --------------------------------------------------------------------------------
def test_readme_is_short() -> None:
    lines = len(README.read_text().splitlines())
    assert lines <= README_MAX_LINES, f"README.md has {lines} lines (at most {README_MAX_LINES})"


def test_readme_test_command_is_the_one_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci in README.read_text().splitlines()


def test_readme_runs_the_main_job_offline() -> None:
    commands = [c for c in COMMANDS if c.path == README and "scripts/setup.sh" in c.text]
    assert any(c.args[:1] == ("run",) and "--data-dir" in c.args for c in commands)


# every page a reader may open: the study folders' own pages (tuning.md, report.md) too
ALL_PAGES = [README, *sorted((ROOT / "docs").rglob("*.md"))]


@pytest.mark.parametrize("page", ALL_PAGES, ids=[str(p.relative_to(ROOT)) for p in ALL_PAGES])
def test_user_documentation_has_no_issue_numbers(page: Path) -> None:
    found = re.findall(r"\bissues? #?\d+", page.read_text(), re.IGNORECASE)
    assert not found, f"{page.relative_to(ROOT)} refers to {found}: say what, not which ticket"


# --- links ---------------------------------------------------------------------------------------
LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub writes it."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    lines, inside = [], False
    for line in path.read_text().splitlines():
        if FENCE.match(line):
            inside = not inside
        elif not inside and line.startswith("#"):
            lines.append(slug(line.lstrip("#")))
    return set(lines)


@pytest.mark.parametrize("page", USER_DOCS, ids=[str(p.relative_to(ROOT)) for p in USER_DOCS])
def test_relative_links_lead_somewhere(page: Path) -> None:
    broken = []
    for target in LINK.findall(page.read_text()):
        if re.match(r"^[a-z]+:", target):
            continue  # https:, mailto:
        file, _, anchor = target.partition("#")
        where = (page.parent / file).resolve() if file else page
        checkable = where.exists() and where.suffix == ".md"
        if not where.exists() or (anchor and checkable and anchor not in anchors(where)):
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)}: broken links {broken}"
