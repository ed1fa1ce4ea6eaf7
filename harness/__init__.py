"""corebench's core: records, plugin hooks, base classes, runner, sandbox and store.

Plugin authors import what they need from here:

    from corebench.harness import Benchmark, System, Backend, BatchingBackend, hookimpl
"""

from .backend import Backend, BatchingBackend
from .benchmark import Benchmark
from .context import BudgetExceeded, ExampleCheck, SolveContext
from .errors import CorebenchError, DatasetMissingError, UnknownNameError
from .hookspecs import hookimpl
from .prompts import render
from .records import (
    ExecutionResult,
    Generation,
    GenerationRequest,
    Message,
    ModelCall,
    RunConfig,
    Solution,
    Task,
    TestOutcome,
    Verdict,
)
from .system import System
from .testsuite import Example, FunctionalSuite, docstring_examples, parse_example

__all__ = [
    "Backend",
    "BatchingBackend",
    "Benchmark",
    "BudgetExceeded",
    "CorebenchError",
    "DatasetMissingError",
    "Example",
    "ExampleCheck",
    "ExecutionResult",
    "FunctionalSuite",
    "Generation",
    "GenerationRequest",
    "Message",
    "ModelCall",
    "RunConfig",
    "Solution",
    "SolveContext",
    "System",
    "Task",
    "TestOutcome",
    "UnknownNameError",
    "Verdict",
    "docstring_examples",
    "hookimpl",
    "parse_example",
    "render",
]
