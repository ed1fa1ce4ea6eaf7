"""LiveCodeBench code generation (Jain et al., 2024): problems from LeetCode, AtCoder and Codeforces
with their contest dates, so a model can be scored only on problems published after its cutoff.

Rows as in ``livecodebench/code_generation_lite`` (``question_id``, ``question_content``,
``platform``, ``contest_date``, ``starter_code``, ``difficulty``, ``public_test_cases`` and
``private_test_cases`` as JSON text, the private ones often base64 of zlib of a pickled JSON
string; ``metadata`` with ``func_name`` for LeetCode's functional tests). Release ``release_vN``
is the files ``test.jsonl`` … ``testN.jsonl``; local copies go in ``<data>/livecodebench/``.
"""

from __future__ import annotations

import base64
import io
import json
import pickle
import re
import zlib
from pathlib import Path
from typing import Any

from pydantic import Field

from corebench.harness import FunctionalSuite, StdioExample, Task, hookimpl
from corebench.harness.comparators import JsonEqual, Tokens
from corebench.harness.errors import CorebenchError

from .contest_graders import LiveCodeBenchCall, LiveCodeBenchOutput
from .contest_tasks import ContestBenchmark, ContestProblem, task_prompt
from .hub_data import HubDataset

RELEASES = 6  # release_v1 … release_v6
TIME_LIMIT_S = 6.0  # per test, as LiveCodeBench's own runner (there wall-clock, here CPU time)
# LiveCodeBench's runner runs every program after star-imports of these modules (and the modules
# themselves), so a program that forgot an import still runs; its published scores assume it.
PRELUDE_MODULES = [
    "string",
    "re",
    "datetime",
    "collections",
    "heapq",
    "bisect",
    "copy",
    "math",
    "random",
    "statistics",
    "itertools",
    "functools",
    "operator",
    "io",
    "sys",
    "json",
    "builtins",
    "typing",
]
PRELUDE = (
    "".join(f"from {m} import *\n" for m in PRELUDE_MODULES)
    + "".join(f"import {m}\n" for m in PRELUDE_MODULES if m not in ("builtins", "typing"))
    + "sys.setrecursionlimit(50000)\n"
)
# what its evaluation process also sets before any program runs (compute_code_generation_metrics),
# and its reliability_guard's `quit = None` (`exit` it leaves)
OFFICIAL_PRELUDE = (  # (before the prelude's star-import of builtins copies `quit`)
    "__import__('builtins').quit = None\n" + PRELUDE + "sys.set_int_max_str_digits(50000)\n"
)


class _NoGlobals(pickle.Unpickler):
    """Unpickles plain data only: the dataset's pickles hold a string, never code."""

    def find_class(self, module: str, name: str) -> Any:
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a dataset pickle")


def decode_tests(text: str) -> list[dict[str, Any]]:
    """Test cases stored as JSON text, or as base64(zlib(pickle(JSON text)))."""
    try:
        return json.loads(text)
    except ValueError:
        raw = zlib.decompress(base64.b64decode(text))
        return json.loads(_NoGlobals(io.BytesIO(raw)).load())


def _file_stem(n: int) -> str:
    return "test" if n == 1 else f"test{n}"


class LiveCodeBench(ContestBenchmark):
    name = "livecodebench"
    description = (
        "LiveCodeBench code generation: dated contest problems, stdin/stdout and functional"
    )

    class Options(ContestBenchmark.Options):
        release: str = Field(
            f"release_v{RELEASES}", description=f"release_v1 … release_v{RELEASES} (cumulative)"
        )
        start_date: str = Field("", description="only problems from this date on (YYYY-MM-DD)")
        end_date: str = Field("", description="only problems up to this date (YYYY-MM-DD)")
        platform: str = Field("", description="only this platform (leetcode, codeforces, atcoder)")

    source = HubDataset(
        "livecodebench",
        "livecodebench",
        "livecodebench/code_generation_lite",
        {_file_stem(n): f"{_file_stem(n)}.jsonl" for n in range(1, RELEASES + 1)},
    )

    def __init__(self, data_dir: Path | None = None, **options: Any):
        super().__init__(data_dir, **options)
        match = re.fullmatch(r"release_v(\d+)", self.options.release)
        if not match or not 1 <= int(match[1]) <= RELEASES:
            raise CorebenchError(
                f"livecodebench: unknown release {self.options.release!r} "
                f"(release_v1 … release_v{RELEASES})"
            )
        self.release = int(match[1])

    def split_files(self, split: str) -> list[str]:
        return [_file_stem(n) for n in range(1, self.release + 1)]

    def convert(self, row: dict[str, Any], split: str) -> ContestProblem | None:
        date = str(row["contest_date"])[:10]  # ISO date: compared as text
        if self.options.start_date and date < self.options.start_date:
            return None
        if self.options.end_date and date > self.options.end_date:
            return None
        if self.options.platform and row["platform"] != self.options.platform:
            return None
        public = decode_tests(row["public_test_cases"])
        private = decode_tests(row["private_test_cases"]) if row.get("private_test_cases") else []
        cases = {"public": public, "private": private}
        functional = bool(public) and public[0].get("testtype") == "functional"
        if functional:
            func = json.loads(row.get("metadata") or "{}")["func_name"]
            entry = f"Solution.{func}"

            def args(case: dict[str, Any]) -> list[Any]:
                return [json.loads(line) for line in case["input"].split("\n") if line.strip()]

            inputs = {name: [args(c) for c in cs] for name, cs in cases.items() if cs}
            expected = {
                name: [json.loads(c["output"]) for c in cs] for name, cs in cases.items() if cs
            }
            examples = [
                f"assert Solution().{func}({', '.join(map(repr, args(c)))}) == "
                f"{json.loads(c['output'])!r}"
                for c in public
            ]
            comparator = LiveCodeBenchCall() if self.official else JsonEqual()
            suite = FunctionalSuite(entry, "", inputs, expected=expected, comparator=comparator)
        else:
            entry = None
            examples = [StdioExample(input=c["input"], output=c["output"]) for c in public]
            inputs = {name: [[c["input"]] for c in cs] for name, cs in cases.items() if cs}
            expected = {name: [c["output"] for c in cs] for name, cs in cases.items() if cs}
            suite = FunctionalSuite(
                "",
                "",
                inputs,
                expected=expected,
                comparator=LiveCodeBenchOutput() if self.official else Tokens(),
                mode="stdio",
                # its runner calls a program in-process and catches SystemExit: sys.exit(1) ends
                # a program as print-then-return does
                exit_status="system_exit" if self.official else "zero",
            )
        suite.time_limit_s = TIME_LIMIT_S
        suite.prelude = OFFICIAL_PRELUDE if self.official else PRELUDE
        return ContestProblem(
            Task(
                task_id=f"LiveCodeBench/{row['question_id']}",
                benchmark=self.name,
                prompt=task_prompt(row["question_content"], row.get("starter_code") or "", entry),
                entry_point=entry,
                examples=examples,
                metadata={
                    "platform": row["platform"],
                    "contest_date": date,
                    "difficulty": row.get("difficulty", ""),
                    "title": row.get("question_title", ""),
                },
            ),
            suite,
        )


@hookimpl
def register_benchmarks(register):
    register(LiveCodeBench)
