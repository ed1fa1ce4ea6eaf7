"""corebench's core: records, plugin hooks, base classes, runner, sandbox and store.

Plugin authors import what they need from here:

    from corebench.harness import Benchmark, System, Backend, BatchingBackend, hookimpl
"""

from .backend import Backend, BatchingBackend
from .benchmark import Benchmark
from .context import BudgetExceeded, ExampleCheck, SolveContext
from .errors import CorebenchError, DatasetMissingError, UnknownNameError
from .examples import Example, docstring_examples, parse_example, statement_examples
from .hookspecs import hookimpl
from .options import Options
from .prompts import render
from .records import (
    ExecutionResult,
    Generation,
    GenerationRequest,
    Message,
    ModelCall,
    RunConfig,
    Solution,
    StdioExample,
    Task,
    TestOutcome,
    Verdict,
)
from .system import System
from .testsuite import FunctionalSuite

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
    "Options",
    "RunConfig",
    "Solution",
    "SolveContext",
    "StdioExample",
    "System",
    "Task",
    "TestOutcome",
    "UnknownNameError",
    "Verdict",
    "docstring_examples",
    "hookimpl",
    "parse_example",
    "render",
    "statement_examples",
]
