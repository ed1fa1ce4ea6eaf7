"""Programs that try to look smaller or faster than they are, or to reach the process that times
them, judged with measurement (``repeats: 3``) through a judging service on loopback; prints one
JSON object: the service's memory accounting and, per program, its measurement or its error.

Run by ``tests/test_containment.py``, as root and as an unprivileged user:

    python tests/hostile_measurement.py [NAME ...]
"""

from __future__ import annotations

import json
import sys
import threading

from corebench.harness.sandbox import Executor
from corebench.harness.service import JudgeClient, JudgeServer, JudgeService

MB12 = 12 << 20
# the reference: 12 MB held in its own memory, every page touched
HOLDS = (
    "def f(n):\n    held = bytearray(12 << 20)\n    held[::4096] = b'x' * (3 << 10)\n    return n\n"
)
SQUARES = "def f(n):\n    s = 0\n    for i in range(n):\n        s += i * i\n    return s\n"
PROGRAMS = {
    # the same 12 MB: the honest copy, in a memfd written with write() (never mapped), in files
    # on the tmpfs folders, and in a pipe it writes to itself
    "holds": (HOLDS, HOLDS),
    "memfd": (
        "import os\n"
        "def f(n):\n"
        "    fd = os.memfd_create('kept')\n"
        "    for _ in range(12):\n        os.write(fd, b'x' * (1 << 20))\n"
        "    return n\n",
        HOLDS,
    ),
    "tmpfs_file": (
        "def f(n):\n"
        "    with open('kept', 'wb') as kept:  # its folder: a tmpfs of its own when timed\n"
        "        for _ in range(12):\n            kept.write(b'x' * (1 << 20))\n"
        "    return n\n",
        HOLDS,
    ),
    "deleted_file": (
        "import os\n"
        "def f(n):\n"
        "    for place in ('/dev/shm', '/tmp', '.'):  # the first it may write\n"
        "        try:\n"
        "            with open(f'{place}/kept', 'wb') as kept:\n"
        "                for _ in range(12):\n                    kept.write(b'x' * (1 << 20))\n"
        "        except OSError:\n            continue\n"
        "        os.unlink(f'{place}/kept')  # gone before the answer, its pages with it\n"
        "        return n\n",
        HOLDS,
    ),
    # a fresh interpreter allocates ~30 MB less than the fork it replaces: refused, or counted
    "execve": (
        "import os, sys\n"
        "def f(n):\n"
        "    held = bytearray(12 << 20)\n"
        "    held[::4096] = b'x' * (3 << 10)\n"
        "    try:\n"
        "        os.fstat(6)  # a descriptor only a timed run holds: tried only when timed\n"
        "    except OSError:\n        return n\n"
        "    try:\n"
        "        os.execv(sys.executable, [sys.executable, '-c', 'pass'])\n"
        "    except OSError:\n        pass\n"
        "    return n\n",
        HOLDS,
    ),
    # state kept in folder timestamps (the answer as a time in nanoseconds), in a folder of
    # mode 0300 that no walk could list; the next run reads it instead of working
    "timestamps": (
        "import os\n"
        "def f(n):\n"
        "    for place in ('/tmp', '/dev/shm', '.'):\n"
        "        kept = f'{place}/answer-{n}'\n"
        "        try:\n"
        "            return os.stat(kept).st_mtime_ns\n"
        "        except OSError:\n            pass\n"
        "    s = 0\n"
        "    for i in range(n):\n        s += i * i\n"
        "    for place in ('/tmp', '/dev/shm', '.'):\n"
        "        kept = f'{place}/answer-{n}'\n"
        "        try:\n"
        "            os.mkdir(kept)\n"
        "            os.utime(kept, ns=(s, s))\n"
        "            os.chmod(kept, 0o300)\n"
        "        except OSError:\n            pass\n"
        "    return s\n",
        SQUARES,
    ),
    # the process that times it, reached: killed, stopped, reniced, moved to another CPU
    "reach": (
        "import fcntl, os, signal\n"
        "def sigio(pid):  # the kernel signals a descriptor's owner when it can be read\n"
        "    read, write = os.pipe()\n"
        "    fcntl.fcntl(read, fcntl.F_SETOWN, pid)\n"
        "    fcntl.fcntl(read, fcntl.F_SETFL, os.O_ASYNC)\n"
        "    os.write(write, b'x')\n"
        "def f(n):\n"
        "    try:\n"
        "        os.fstat(6)  # a descriptor only a timed run holds: tried only when timed\n"
        "    except OSError:\n"
        "        return work(n)\n"
        "    timer, reached = os.getppid(), 0\n"
        "    for attempt in (\n"
        "        lambda: os.kill(timer, signal.SIGKILL),\n"
        "        lambda: os.kill(-1, signal.SIGKILL),\n"
        "        lambda: os.setpriority(os.PRIO_PGRP, 0, 19),\n"
        "        lambda: os.setpriority(os.PRIO_USER, 0, 19),\n"
        "        lambda: os.sched_setaffinity(timer, {0}),\n"
        "        lambda: (os.setpgid(0, os.getpgid(timer)), os.kill(0, signal.SIGKILL)),\n"
        "        lambda: sigio(timer),\n"
        "        lambda: signal.pidfd_send_signal(\n"
        "            os.open(f'/proc/{timer}', os.O_RDONLY | os.O_DIRECTORY), signal.SIGKILL),\n"
        "    ):\n"
        "        try:\n            attempt()\n            reached += 1\n"
        "        except OSError:\n            pass\n"
        "    # any attempt that went through answers wrongly: the measurement is then refused\n"
        "    return work(n) + reached\n" + SQUARES.replace("def f(", "def work("),
        SQUARES,
    ),
}
INPUTS = {"memory": [[1], [2], [3]], "time": [[200_000], [300_000], [400_000]]}


def judge(client: JudgeClient, name: str) -> dict:
    code, reference = PROGRAMS[name]
    inputs = INPUTS["time" if reference is SQUARES else "memory"]
    tests = {"entry_point": "f", "inputs": {"base": inputs}, "reference_code": reference}
    answer = client.judge({"code": code, "tests": tests, "repeats": 3})
    measured = (answer.get("result") or {}).get("measurement") or {}
    return {
        "verdict": (answer.get("result") or {}).get("verdict"),
        "error": answer.get("measurement_error"),
        "memory_ratio": measured.get("memory_ratio"),
        "runtime_ratio": measured.get("runtime_ratio"),
        "peak_memory_bytes": measured.get("peak_memory_bytes"),
    }


def main() -> None:
    names = sys.argv[1:] or list(PROGRAMS)
    service = JudgeService(Executor(workers=1))
    server = JudgeServer(service, "127.0.0.1", 0, None)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        client = JudgeClient(server.url)
        found = {"memory_accounting": client.health().get("memory_accounting")}
        found |= {name: judge(client, name) for name in names}
    finally:
        server.stop()
        thread.join(timeout=30)
        server.close()
    print(json.dumps(found))


if __name__ == "__main__":
    main()
