"""The plain-data codec between the sandbox child and the harness."""

import json
import math

import pytest

from corebench.harness.sandbox.codec import (
    Digest,
    Opaque,
    decode,
    encode,
    encode_text,
    reported_output,
)

VALUES = [
    None, True, 0, -(2**80), 3.5, math.inf, "text", b"\x00bytes", 1 + 2j,
    [1, 2, 3], (1, "a"), [(1, 2), [3, (4,)]], {1, 2, 3}, frozenset({"x"}),
    {"a": 1, (1, 2): [None]}, [1.5, 2.5], ["a"] * 2000, [(i, str(i)) for i in range(3000)],
]  # fmt: skip


@pytest.mark.parametrize("value", VALUES, ids=lambda v: type(v).__name__)
def test_round_trip_keeps_types(value):
    text, digest = encode_text(value)
    assert digest is None
    again = decode(json.loads(text))
    assert again == value and type(again) is type(value)
    assert text == json.dumps(encode(value))  # streamed and direct encodings agree


def test_nan_round_trips_as_nan():
    assert math.isnan(decode(json.loads(encode_text(float("nan"))[0])))


def test_subclasses_and_unknown_objects_become_plain_or_opaque():
    class Sneaky(int):
        def __eq__(self, other):
            return True

    assert type(decode(encode(Sneaky(3)))) is int
    opaque = decode(encode(object()))
    assert isinstance(opaque, Opaque) and opaque != 0


def test_large_outputs_are_digests_that_compare_by_content():
    big = [(i, "x" * 20) for i in range(400_000)]
    text, digest = encode_text(big, limit=1_000_000)
    assert text is None and len(digest) == 64
    assert encode_text(list(big), limit=1_000_000)[1] == digest
    assert encode_text(big[:-1], limit=1_000_000)[1] != digest
    assert reported_output({"digest": digest}) == Digest(digest)


def test_unordered_containers_encode_canonically():
    a = {"b", "a", "c"}
    b = set()
    for item in ("c", "a", "b"):
        b.add(item)
    assert json.dumps(encode(a)) == json.dumps(encode(b))
    assert json.dumps(encode({"x": 1, "y": 2})) == json.dumps(encode({"y": 2, "x": 1}))


def test_long_flat_rows_are_hashed_canonically_and_keep_tuple_vs_list():
    rows = [("r", "g", i) for i in range(70_000)]
    rebuilt = [tuple(["r" + "", "".join(["g"]), i]) for i in range(70_000)]  # equal, other objects
    digest = encode_text(rows)[1]
    assert digest is not None and encode_text(rebuilt)[1] == digest
    assert encode_text([list(r) for r in rows])[1] != digest
    assert encode_text(rows[:-1] + [("r", "g", -1)])[1] != digest
