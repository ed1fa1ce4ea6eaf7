"""How a child process is confined: bubblewrap namespaces (or, only when asked, rlimits alone)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path

import psutil

from ..config import DEFAULT_MEMORY_LIMIT_BYTES, ENV_ISOLATION
from ..errors import CorebenchError

SANDBOX_HOME = "/sandbox"  # the solution's private writable working directory inside bubblewrap
NOBODY = 65534  # uid and gid a root harness's solutions run as


class IsolationWarning(UserWarning):
    """Solutions run with resource limits only (no namespace isolation)."""


def memory_limit_bytes() -> int:
    """Default address-space cap: 4 GiB, the machine's RAM, or the container's limit if lower."""
    limits = [DEFAULT_MEMORY_LIMIT_BYTES, psutil.virtual_memory().total]
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            limits.append(int(text))
    return min(limits)


@functools.cache
def _bwrap_works(bwrap: str) -> bool:
    try:
        probe = subprocess.run(
            [bwrap, "--ro-bind", "/", "/", "--unshare-all", "--die-with-parent", "--", "true"],
            capture_output=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


BWRAP, UNSAFE = "bwrap", "unsafe"
INSTALL_BWRAP = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install "
    "bubblewrap; Arch: pacman -S bubblewrap)"
)


def is_unsafe(mode: str | None) -> bool:
    """Whether a run's recorded isolation is the unsafe one."""
    return mode == UNSAFE


@functools.cache
def isolation_mode(wanted: str | None = None) -> str:
    """'bwrap' or 'unsafe', from ``wanted`` or $COREBENCH_ISOLATION (auto | bwrap | unsafe).

    ``auto`` (the default) needs bubblewrap and refuses without it: generated code never runs
    silently without isolation. ``unsafe`` runs it with resource limits only, as the user
    explicitly asked; runs record it and ``show`` and the leaderboard display it.
    """
    wanted = (wanted or os.environ.get(ENV_ISOLATION) or "auto").lower()
    if wanted == "rlimits":  # the name this mode had before
        wanted = UNSAFE
    if wanted not in ("auto", BWRAP, UNSAFE):
        raise CorebenchError(
            f"unknown isolation {wanted!r} (auto, bwrap, or unsafe to run without a sandbox)"
        )
    if wanted == UNSAFE:
        as_root = (
            " and AS ROOT (`nobody` cannot read this Python installation), with write access to "
            "the whole file system"
            if not drop_to_nobody(UNSAFE)
            else ""
        )
        warnings.warn(
            "isolation is unsafe: generated programs run with resource limits only, without "
            f"filesystem, network and process isolation{as_root}; their measurements are not "
            "protected from them either",
            IsolationWarning,
            stacklevel=2,
        )
        return UNSAFE
    bwrap = shutil.which("bwrap")
    if bwrap and sys.platform.startswith("linux") and _bwrap_works(bwrap):
        return BWRAP
    raise CorebenchError(
        "bubblewrap is not available, so generated code cannot run isolated: "
        f"{INSTALL_BWRAP}, or accept running it unconfined with --isolation unsafe "
        f"(${ENV_ISOLATION}=unsafe)"
    )


@functools.cache
def nobody_can_run_python() -> bool:
    """Whether `nobody` can traverse to and read the interpreter's library, site-packages and the
    child program (then a root harness drops its children to `nobody` even without bubblewrap)."""
    import stat

    folders = [sysconfig.get_paths()["stdlib"], *site_packages(), str(Path(__file__).parent)]
    for folder in folders:
        path = Path(os.path.realpath(folder))
        for part in [path, *path.parents]:
            try:
                mode = os.stat(part).st_mode
            except OSError:
                return False
            if not mode & stat.S_IXOTH or (part == path and not mode & stat.S_IROTH):
                return False
    return True


def drop_to_nobody(mode: str) -> bool:
    """A root harness runs solutions as `nobody`: always inside bubblewrap, and without it when
    `nobody` can still run the interpreter."""
    return os.geteuid() == 0 and (mode == BWRAP or nobody_can_run_python())


def _readonly_roots() -> list[str]:
    roots = {"/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin", "/etc"}
    roots |= {sys.prefix, sys.base_prefix, sys.exec_prefix, sysconfig.get_paths()["stdlib"]}
    roots |= {os.path.abspath(p) for p in sys.path if p and os.path.isdir(p)}
    roots.add(str(Path(__file__).parent))
    real = sorted(
        {os.path.realpath(r) for r in roots if os.path.exists(r)}
        | {r for r in roots if os.path.exists(r)}
    )
    return real


def child_command(
    workdir: str,
    mode: str,
    fixed_layout: bool = False,
    zygote: bool = False,
    timing: bool = False,
    memory_cgroup: str | None = None,
) -> tuple[list[str], str]:
    """The argv that runs the sandbox child, and the working directory it sees.

    ``fixed_layout`` (measurement phase) turns address-space randomization off for the child, where
    util-linux's ``setarch`` exists: a randomized layout alone moves a pure-Python loop's speed by a
    few per cent from one process to the next. ``zygote`` runs ``zygote.py`` instead, in the same
    sandbox, keeping CAP_SYS_ADMIN (in its user namespace) to give each fork namespaces of its own;
    a ``timing`` session keeps it too, to give each timed run fresh folders. ``memory_cgroup``
    (``FD:VERSION``): the cgroup a timing session joins, an open folder it inherits.
    """
    child = str(Path(__file__).with_name("zygote.py" if zygote else "child.py"))
    # -S: no site processing (.pth files, editable-install finders: ~40 ms per start); the job
    # lists the site-packages folders instead, so solutions can still import installed packages.
    python = [sys.executable, "-I", "-S", "-B", child]
    if memory_cgroup is not None:
        python += ["--memory-cgroup", memory_cgroup]
    setarch = shutil.which("setarch") if fixed_layout and sys.platform.startswith("linux") else None
    prefix = [setarch, "--addr-no-randomize"] if setarch else []
    if mode != BWRAP:
        return prefix + python, workdir
    argv = [*prefix, shutil.which("bwrap") or "bwrap", "--die-with-parent", "--new-session"]
    argv += [
        "--unshare-pid",
        "--unshare-net",
        "--unshare-ipc",
        "--unshare-uts",
    ]
    if memory_cgroup is None:  # a session joins its cgroup from here (cgroup v2's nsdelegate
        argv.append("--unshare-cgroup-try")  # refuses a move out of the namespace's root)
    if os.geteuid() != 0:  # unprivileged bubblewrap; root instead drops to NOBODY in the child
        argv.append("--unshare-user")
        if zygote or timing:
            argv += ["--cap-add", "CAP_SYS_ADMIN"]
    # /proc read-only: a program cannot reset its own memory high-water mark (the harness resets
    # it through the host's /proc); /tmp first: the binds below may live under it (a checkout or
    # venv in /tmp) and must stay visible. /dev/shm a tmpfs of its own: /dev and / are made
    # read-only below, so that /sandbox, /tmp and /dev/shm are all a program can write (in a user
    # namespace the sandbox's own root tmpfs and /dev would be its to write; a timing session,
    # which lives across runs, watches only those three).
    argv += ["--dev", "/dev", "--tmpfs", "/dev/shm"]
    argv += ["--proc", "/proc", "--remount-ro", "/proc", "--tmpfs", "/tmp"]
    roots = _readonly_roots()
    # Parents that bubblewrap would create as 0700: make them traversable for `nobody`.
    parents = sorted({str(p) for r in roots for p in Path(r).parents if str(p) != "/"} - set(roots))
    for parent in parents:
        argv += ["--perms", "0755", "--dir", parent]
    for root in roots:
        argv += ["--ro-bind", root, root]
    argv += [
        "--bind", workdir, SANDBOX_HOME,
        "--remount-ro", "/dev",
        "--remount-ro", "/",
        "--chdir", SANDBOX_HOME,
        "--", *python,
    ]  # fmt: skip
    return argv, SANDBOX_HOME


def site_packages() -> list[str]:
    """Folders a solution may import installed packages from (without running their .pth hooks)."""
    paths = sysconfig.get_paths()
    return list(dict.fromkeys(p for p in (paths["purelib"], paths["platlib"]) if os.path.isdir(p)))


def minimal_env(home: str) -> dict[str, str]:
    """The only environment a solution gets: no tokens, keys or proxies from the harness."""
    return {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "HOME": home,
        "TMPDIR": home,
        "LANG": "C.UTF-8",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "OMP_NUM_THREADS": "1",
    }
