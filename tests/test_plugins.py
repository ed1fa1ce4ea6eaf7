"""Plugin discovery: built-ins through entry points, an installed third-party plugin, broken ones."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import pytest

from corebench.harness import System, hookimpl
from corebench.harness.errors import UnknownNameError
from corebench.harness.registry import Origin, PluginWarning, load_plugins

CLI = [sys.executable, "-m", "corebench.harness.cli"]


def test_builtins_are_found_through_entry_points():
    plugins = load_plugins()
    assert {"mbpp", "humaneval"} <= {e.name for e in plugins.benchmarks}
    assert {"direct", "corecode"} <= {e.name for e in plugins.systems}
    assert {"embedded", "hf"} <= {e.name for e in plugins.backends}
    entry = plugins.systems.get("corecode")
    assert entry.origin.distribution == "corebench"
    assert entry.description


def test_unknown_name_suggests_close_matches():
    plugins = load_plugins()
    with pytest.raises(UnknownNameError) as err:
        plugins.systems.get("corecod")
    message = str(err.value)
    assert "unknown system 'corecod'" in message and "Did you mean 'corecode'" in message
    assert "\n" not in message


def test_cli_name_error_is_one_line_and_nonzero(tmp_path):
    proc = subprocess.run(
        [*CLI, "run", "--system", "direkt", "--bench", "mbpp", "--out", str(tmp_path / "r")],
        capture_output=True, text=True,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "Error: unknown system 'direkt'. Did you mean 'direct'? Known: corecode, cot, direct, helper-main, mapcoder, self-debug."
    ]


def test_run_settings_file_is_checked_like_flags(tmp_path):
    """`run --config`: the file's keys are the flags' names, its tables reach the components'
    Options (typed), flags win, and every mistake is one line naming the key."""

    def run_with(text: str, *flags: str) -> str:
        settings = tmp_path / "run.toml"
        settings.write_text(text)
        proc = subprocess.run(
            [*CLI, "run", "--config", str(settings), *flags, "--out", str(tmp_path / "r")],
            capture_output=True, text=True,
        )  # fmt: skip
        errors = [line for line in proc.stderr.splitlines() if line.startswith("Error:")]
        assert proc.returncode != 0 and len(errors) == 1, proc.stderr
        return errors[0]

    base = 'bench = "mbpp"\nsystem = "mapcoder"\n'
    assert "Did you mean 'temperature'" in run_with(base + "temprature = 0.2\n")
    assert "system 'mapcoder' option k: input should be a valid int" in run_with(
        base + '[system_options]\nk = "three"\n'
    )
    # --system on the command line wins over the file; the file's table then meets cot's Options
    assert "unknown system 'cot' option 'k'" in run_with(
        base + "[system_options]\nk = 2\n", "--system", "cot"
    )
    # and -O on the command line wins over the file's table
    assert "option t: input should be greater than or equal to 0" in run_with(
        base + "[system_options]\nt = 2\n", "-O", "t=-1"
    )
    # a value of the wrong type is refused as the flag's would be
    assert "'--temperature': 'hot' is not a valid float" in run_with(base + 'temperature = "hot"\n')
    assert not (tmp_path / "r").exists()  # nothing was started


def test_list_options_documents_every_component():
    proc = subprocess.run([*CLI, "list", "--options"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "-O k: int = 3  exemplars recalled" in proc.stdout
    assert "-B level: str" in proc.stdout and "?max_batch: int = 256" in proc.stdout


def _install_fake_distribution(
    site: Path, name: str, module_source: str, entry_points: str
) -> None:
    """A real installed distribution (dist-info + module) on a path we put on PYTHONPATH."""
    module = name.replace("-", "_")
    (site / f"{module}.py").write_text(textwrap.dedent(module_source))
    info = site / f"{module}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(textwrap.dedent(entry_points))
    (info / "RECORD").write_text("")


def _cli_with(site: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(site)}
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env)


def test_installed_third_party_plugin_is_listed_with_its_distribution(tmp_path):
    _install_fake_distribution(
        tmp_path,
        "corebench-thirdparty",
        """
        from corebench.harness import System, hookimpl

        class Echo(System):
            name = "echo"
            description = "returns the prompt as code"

            async def solve(self, task, ctx):
                return task.prompt

        @hookimpl
        def register_systems(register):
            register(Echo)
        """,
        "[corebench]\nthirdparty = corebench_thirdparty\n",
    )
    proc = _cli_with(tmp_path, "list")
    assert proc.returncode == 0, proc.stderr
    line = next(line for line in proc.stdout.splitlines() if line.strip().startswith("echo"))
    assert "returns the prompt as code" in line and "[corebench-thirdparty 1.2.3]" in line
    assert "corecode" in proc.stdout  # built-ins still there


def test_a_plugin_adds_its_own_command_as_train_and_leaderboard_do(tmp_path):
    _install_fake_distribution(
        tmp_path,
        "corebench-hello",
        """
        import click
        from corebench.harness import hookimpl

        @click.command()
        @click.argument("name")
        def hello(name):
            "Say hello."
            click.echo(f"hello {name}")

        @hookimpl
        def register_commands(cli):
            cli.add_command(hello)
        """,
        "[corebench]\nhello = corebench_hello\n",
    )
    listed = _cli_with(tmp_path, "--help")
    assert listed.returncode == 0, listed.stderr
    commands = [
        line.split()[0] for line in listed.stdout.split("Commands:")[1].splitlines() if line.strip()
    ]
    assert {"hello", "train", "leaderboard", "run"} <= set(commands)
    said = _cli_with(tmp_path, "hello", "world")
    assert said.returncode == 0 and said.stdout == "hello world\n"


def absolute_imports(folder: str) -> list[tuple[str, str]]:
    """(file, module) for every absolute import in a top-level folder of the repository."""
    import ast

    root = Path(__file__).resolve().parents[1] / folder
    found = []
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found += [(path.name, a.name) for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found += [(path.name, node.module)]
    return found


def test_the_core_imports_nothing_above_it():
    # harness/ is the core: training, leaderboards and the built-in plugins build on it
    above = ("corebench.training", "corebench.leaderboards", "corebench.plugins")
    assert [(f, m) for f, m in absolute_imports("harness") if m.startswith(above)] == []


# what docs/design.md says a plugin author may import from the core
PLUGIN_API = {
    "corebench.harness",
    *(
        f"corebench.harness.{name}"
        for name in [
            "benchmark",
            "system",
            "backend",
            "options",
            "records",
            "testsuite",
            "examples",
            "comparators",
            "context",
            "prompts",
            "extract",
            "errors",
            "config",
            "metadata",
            "hookspecs",
            "modelspec",
            "decoding.engine",
            "decoding.precision",
        ]
    ),
}


def test_builtin_plugins_use_only_the_plugin_api_and_training_no_plugin_module():
    core = [(f, m) for f, m in absolute_imports("plugins") if m.startswith("corebench.harness")]
    assert [(f, m) for f, m in core if m not in PLUGIN_API] == []
    assert [
        (f, m) for f, m in absolute_imports("training") if m.startswith("corebench.plugins")
    ] == []
    assert [
        (f, m) for f, m in absolute_imports("leaderboards") if m.startswith("corebench.plugins")
    ] == []


def test_plugin_that_fails_to_import_warns_and_the_rest_works(tmp_path):
    _install_fake_distribution(
        tmp_path,
        "corebench-broken",
        "raise RuntimeError('boom at import')\n",
        "[corebench]\nbroken = corebench_broken\n",
    )
    proc = _cli_with(tmp_path, "list")
    assert proc.returncode == 0
    assert (
        "plugin 'broken' (corebench-broken 1.2.3) failed to import: RuntimeError: boom at import"
        in proc.stderr
    )
    assert "mbpp" in proc.stdout and "corecode" in proc.stdout


class _Dup(System):
    name = "direct"

    async def solve(self, task, ctx):
        return ""


class _DupPlugin:
    @hookimpl
    def register_systems(self, register):
        register(_Dup)
        register(object)  # malformed: not a System


class _RaisingPlugin:
    @hookimpl
    def register_backends(self, register):
        raise ValueError("cannot register")


def test_duplicate_malformed_and_raising_registrations_warn():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plugins = load_plugins(
            extra=[
                (_DupPlugin(), Origin("dup", "dup-dist", "0.1")),
                (_RaisingPlugin(), Origin("raiser", "r-dist", "2")),
            ]
        )
    messages = [str(w.message) for w in caught if issubclass(w.category, PluginWarning)]
    assert any("registered system 'direct' again" in m and "dup-dist" in m for m in messages)
    assert any("not a System subclass" in m for m in messages)
    assert any("raiser" in m and "cannot register" in m for m in messages)
    assert plugins.systems.get("direct").component is not _Dup  # the first registration is kept
    assert "embedded" in plugins.backends
