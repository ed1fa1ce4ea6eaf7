"""MBPP+ test inputs as EvalPlus passes them to a solution.

JSON has no tuples, sets or complex numbers, so the MBPP+ release stores such arguments as lists
(and numbers as strings), and a few dozen tasks turn them back before calling the function.
These are the shapes EvalPlus 0.3.1's loader gives them, written here as a table so that loading
MBPP+ does not import ``evalplus.data`` (which imports Hugging Face ``datasets``: about a second
before the first program can start). ``tests/test_benchmarks.py`` checks every task's every input
against EvalPlus's own loader, types included.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Arguments = list[Any]


def _tuples(items: list[Any]) -> list[tuple]:
    return [tuple(item) for item in items]


def _tuples_deep(value: Any) -> Any:
    return tuple(_tuples_deep(v) for v in value) if isinstance(value, list) else value


def _tuple_if_list(item: Any) -> Any:
    return tuple(item) if isinstance(item, list) else item


def _sets(items: list[Any]) -> list[Any]:
    # EvalPlus gives an empty dict, not an empty set, for an empty list here
    return [set(item) if isinstance(item, list) and item else {} for item in items]


# task number -> one test's arguments, as stored, to the arguments the function is called with
_SHAPES: dict[int, Callable[[Arguments], Any]] = {}


def _shape(numbers: list[int], convert: Callable[[Arguments], Any]) -> None:
    _SHAPES.update(dict.fromkeys(numbers, convert))


_EVERY_ARGUMENT_A_TUPLE = [2, 116, 132, 143, 222, 261, 273, 394, 399, 421, 424, 429, 470, 560]
_EVERY_ARGUMENT_A_TUPLE += [579, 596, 616, 630, 726, 740, 744, 809]
_EVERY_ARGUMENT_A_LIST_OF_TUPLES = [63, 64, 70, 94, 120, 237, 272, 299, 400, 409, 417, 438, 473]
_EVERY_ARGUMENT_A_LIST_OF_TUPLES += [614, 780]

_shape(_EVERY_ARGUMENT_A_TUPLE, _tuples)
_shape(_EVERY_ARGUMENT_A_LIST_OF_TUPLES, lambda args: [_tuples(a) for a in args])
_shape([75, 413, 444, 753], lambda args: [_tuples(args[0]), args[1]])
_shape([106, 750], lambda args: [args[0], tuple(args[1])])
_shape([115], lambda args: [_sets(args[0])])
_shape([124], lambda args: (float(args[0]), complex(args[1])))
_shape([250, 405, 446, 617, 720, 763, 808], lambda args: [tuple(args[0]), args[1]])
_shape([252], lambda args: [complex(args[0])])
_shape([259, 401, 445], lambda args: [tuple(_tuples(a)) for a in args])
_shape([278], lambda args: [tuple(map(_tuple_if_list, args[0]))])
_shape([307], lambda args: [tuple(args[0]), args[1], args[2]])
_shape([580, 615, 791], _tuples_deep)
_shape([722], lambda args: [{k: tuple(v) for k, v in args[0].items()}, *args[1:]])


def mbpp_plus_inputs(task_id: str, inputs: list[Arguments]) -> list[Any]:
    """Every test's arguments of ``task_id`` ("Mbpp/N") as the function receives them."""
    convert = _SHAPES.get(int(task_id.rsplit("/", 1)[-1]))
    return inputs if convert is None else [convert(args) for args in inputs]
