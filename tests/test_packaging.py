"""The project installs as one `corebench` namespace: editable here, and as a built wheel."""

from __future__ import annotations

import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import corebench.harness
import corebench.leaderboards
import corebench.plugins
import corebench.training

ROOT = Path(__file__).resolve().parents[1]


def test_editable_install_maps_top_level_folders():
    for name in ("harness", "plugins", "leaderboards", "training"):
        module = getattr(corebench, name)
        assert Path(module.__file__).resolve().parent == ROOT / name


def test_every_package_folder_is_listed_for_the_wheel():
    """A folder with an ``__init__.py`` that pyproject's ``packages`` leaves out installs
    editable (whole folders are mapped) but is missing from a built wheel."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    setup = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = {folder: name for name, folder in setup["package-dir"].items()}
    found = set()
    for folder, name in folders.items():
        for init in (ROOT / folder).rglob("__init__.py"):
            if ".venv" in init.parts or "__pycache__" in init.parts:
                continue
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join([name, *parts]))
    assert sorted(found - set(setup["packages"])) == []


@pytest.mark.slow
def test_wheel_installs_into_a_fresh_venv_and_runs(tmp_path):
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w", str(dist), str(ROOT)],
        check=True, capture_output=True,
    )  # fmt: skip
    wheel = next(dist.glob("corebench-*.whl"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True)
    # Dependencies come from this environment, appended after the fresh venv's own site-packages
    # (so `corebench` itself can only come from the wheel).
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    Path(site, "_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    check = subprocess.run(
        [python, "-c", "import corebench.harness, corebench.plugins.systems.corecode as c; print(corebench.harness.__file__); print(c.__file__)"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert check.returncode == 0, check.stderr
    assert all(line.startswith(site) for line in check.stdout.split())
    listed = subprocess.run(
        [venv / "bin" / "corebench", "list"], capture_output=True, text=True, cwd=tmp_path
    )
    assert listed.returncode == 0, listed.stderr
    assert "corecode" in listed.stdout and "mbpp" in listed.stdout and "embedded" in listed.stdout
    # prompt templates are package data: a system can render its prompts from the wheel
    render = subprocess.run(
        [python, "-c", "from corebench.harness.prompts import render; print(render('corebench.plugins.systems.corecode', 'planner.txt', prompt='P', entry_point='f', similar=''))"],
        capture_output=True, text=True, cwd=tmp_path,
    )  # fmt: skip
    assert "You are the Planner" in render.stdout, render.stderr
