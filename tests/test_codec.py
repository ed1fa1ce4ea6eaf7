"""The plain-data codec between the sandbox child and the harness, and how outputs travel."""

import hashlib
import itertools
import json
import math

import pytest

from corebench.harness.sandbox import protocol
from corebench.harness.sandbox.codec import (
    DIGEST_CHUNK_ROWS,
    FORMAT,
    LONG_STRING_CHARS,
    PICKLE_DIGEST_ITEMS,
    Digest,
    Opaque,
    _bare_json,
    _flat,
    _flat_lists,
    _flat_rows,
    _text_rows_digest,
    decode,
    encode,
    encode_text,
    reported_output,
)
from corebench.harness.sandbox.protocol import (
    ProtocolError,
    event_line,
    parse_event,
    passed_test_line,
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


def test_long_rows_of_strings_are_hashed_by_their_exact_split():
    n = DIGEST_CHUNK_ROWS + PICKLE_DIGEST_ITEMS  # more than one chunk
    rows = [("red", "green", str(i)) for i in range(n)]
    digest = encode_text(rows)[1]
    rebuilt = [tuple(["re" + "d", "".join(["gr", "een"]), str(i)]) for i in range(n)]
    assert digest is not None and encode_text(rebuilt)[1] == digest
    assert encode_text(tuple(rows))[1] not in (None, digest)  # a tuple of rows is not a list
    assert encode_text([list(r) for r in rows])[1] not in (None, digest)
    # the same characters split differently: within a row, across rows, across chunks
    moved = [*rows[:5], ("redg", "reen", "5"), *rows[6:]]
    assert encode_text(moved)[1] != digest
    regrouped = [*rows[:5], ("red", "green"), ("5", "red", "green", "6"), *rows[7:]]
    assert encode_text(regrouped)[1] != digest
    edge = DIGEST_CHUNK_ROWS - 1  # the last row of the first chunk
    one = [*rows[:edge], ("red", "green", "ab"), ("c", "green", "z"), *rows[edge + 2 :]]
    two = [*rows[:edge], ("red", "green", "abc"), ("", "green", "z"), *rows[edge + 2 :]]
    assert encode_text(one)[1] != encode_text(two)[1]

    class Name(str):
        pass

    assert encode_text([tuple(map(Name, r)) for r in rows])[1] == digest  # a str subclass: its text


def test_long_rows_that_are_not_all_strings_fall_back_to_an_equal_canonical_digest():
    n = PICKLE_DIGEST_ITEMS + 1
    late_number = [("a", "b")] * (n - 1) + [("a", 1)]
    assert _text_rows_digest(late_number, {tuple}) is None
    digest = encode_text(late_number)[1]
    assert digest is not None and encode_text([("a", "b")] * (n - 1) + [("a", 1)])[1] == digest
    assert encode_text([("a", "b")] * (n - 1) + [("a", "1")])[1] != digest
    with_nul = [("a\0b", "c")] * n  # a NUL would make the split ambiguous
    assert _text_rows_digest(with_nul, {tuple}) is None
    assert encode_text(with_nul)[1] != encode_text([("a", "b\0c")] * n)[1]
    mixed = [("a",), ["a"]] * (n // 2 + 1)  # tuples and lists
    assert _text_rows_digest(mixed, {tuple, list}) is None and encode_text(mixed)[1] is not None


def test_a_long_list_of_ints_and_floats_is_encoded_whole_with_the_same_text():
    # HumanEval/130's outputs (a million numbers, ints and floats mixed) took 18 s of the child's
    # CPU item by item
    numbers = [1, 3, 2.0, 8.0, -(2**63) + 1] * 1000
    assert _flat(numbers) is not None
    text = encode_text(numbers)[0]
    assert text == "[" + ", ".join(json.dumps(encode(n)) for n in numbers) + "]"
    assert list(map(type, decode(json.loads(text))[:4])) == [int, int, float, float]
    for odd in (math.nan, math.inf, 2**63, 10**400, 1e300):  # tagged, or beyond the range check
        assert _flat([*numbers, odd]) is None
        back = decode(json.loads(encode_text([*numbers, odd])[0]))[-1]
        assert back == odd or (math.isnan(odd) and math.isnan(back))


def test_a_long_flat_list_of_scalars_travels_as_its_text_for_the_comparator():
    # a million numbers are still under the inline limit as JSON: the benchmark's comparator
    # judges them (float tolerance, 1 == 1.0), not a digest
    numbers = [1, 3, *[i / 2 for i in range(PICKLE_DIGEST_ITEMS + 1)]]
    assert encode_text(numbers) == (json.dumps(numbers), None)


def test_long_rows_with_a_nan_are_digested_from_their_json():
    rows = [(0.5, 1.0)] * PICKLE_DIGEST_ITEMS + [(math.nan, 1.0)]
    text = "[" + ", ".join(json.dumps(encode(row)) for row in rows) + "]"
    assert encode_text(rows, limit=100) == (None, hashlib.sha256(text.encode()).hexdigest())
    # the same rows with a NaN of other bits (-nan): one value in JSON, as before
    other = [(0.5, 1.0)] * PICKLE_DIGEST_ITEMS + [(-math.nan, 1.0)]
    assert encode_text(other, limit=100) == encode_text(rows, limit=100)


def test_scalar_outputs_have_the_text_of_their_encoding():
    for value in ("", 'a\u00e9\n"', 0, -(2**63) + 1, 2**63 - 1, True, False, None):
        assert encode_text(value) == (json.dumps(encode(value)), None)
    for big in (2**63, -(2**63)):  # tagged
        assert encode_text(big) == (json.dumps(encode(big)), None)
        assert decode(json.loads(encode_text(big)[0])) == big
    long = "x" * 100
    assert encode_text(long, limit=50) == (
        None,
        hashlib.sha256(json.dumps(long).encode()).hexdigest(),
    )


def test_a_long_list_of_flat_lists_is_encoded_whole_with_the_same_text():
    coordinates = [[i, -i, i * 3] for i in range(5000)]  # rows of one scalar type: in C
    words = [["x", str(i)] for i in range(5000)]
    assert _flat_lists(coordinates) is not None and _flat_lists(words) is not None
    mixed = [[i, 0.5, "x", None, True] for i in range(5000)]  # mixed rows: item by item
    assert _flat_lists(mixed) is None
    for rows in (coordinates, words, mixed):
        text = encode_text(rows)[0]
        assert text == "[" + ", ".join(json.dumps(encode(row)) for row in rows) + "]"
        assert decode(json.loads(text)) == rows
    tagged = [*coordinates, [2**70]]  # a big integer needs a tag
    assert _flat_lists(tagged) is None
    assert decode(json.loads(encode_text(tagged)[0]))[-1] == [2**70]
    assert math.isnan(decode(json.loads(encode_text([[0.5]] * 2000 + [[math.nan]])[0]))[-1][0])
    copy = encode(coordinates)
    copy[0].append("changed")  # the encoding never shares a row with the value
    assert coordinates[0] == [0, 0, 0]


def test_a_passed_test_line_is_the_event_line_and_parses_the_same_way_fast(monkeypatch):
    for index, text in [
        (0, "1"),
        (7, '"a, \\"output\\": 2}"'),
        (123456, '{"$": "tuple", "v": []}'),
    ]:
        line = passed_test_line(index, text.encode())
        assert line == event_line({"event": "test", "i": index, "status": "ok"}, text)
        fields = json.loads(line)
        with monkeypatch.context() as without_decoder:  # read without the JSON decoder
            without_decoder.setattr(protocol.json, "loads", None)
            event = parse_event(line.rstrip(b"\n"))
        assert event == {**fields, "output": text.encode()}
    # other spellings of the same head are read by the JSON decoder, and checked as before
    spaced = b'{"event":"test","i":3,"status":"ok", "output": 5}'
    assert parse_event(spaced) == {"event": "test", "i": 3, "status": "ok", "output": b"5"}
    with pytest.raises(ProtocolError, match="unreadable"):  # JSON has no leading zeros
        parse_event(b'{"event": "test", "i": 03, "status": "ok", "output": 5}')
    with pytest.raises(ProtocolError, match="malformed"):
        parse_event(b'{"event": "test", "i": true, "status": "ok", "output": 5}')
    with pytest.raises(ProtocolError, match="unknown status"):
        parse_event(b'{"event": "test", "i": 3, "status": "ok ", "output": 5}')


def test_an_output_travels_as_its_json_text_spliced_in_last():
    """The child splices an output's JSON text in as the last field; the harness keeps that text
    (decoded only when needed), however much it looks like a field itself."""
    text = json.dumps([1, 'a, "output": 2}'])
    line = event_line({"event": "test", "i": 0, "status": "ok"}, text)
    assert json.loads(line) == {"event": "test", "i": 0, "status": "ok", "output": json.loads(text)}
    event = parse_event(line.rstrip(b"\n"))
    assert event == {"event": "test", "i": 0, "status": "ok", "output": text.encode()}
    assert reported_output(event) == [1, 'a, "output": 2}']
    with pytest.raises(ProtocolError, match="last field"):  # cut short: no closing brace
        parse_event(line.rstrip(b"\n")[:-1])


def test_a_changed_digest_comes_with_a_new_format():
    # cached reference outputs keep the digests this codec made, under a key holding FORMAT: a
    # digest that changes without a new FORMAT turns correct programs into wrong answers (two
    # HumanEval+ references did, against a stale cache, while the flat-list digest changed)
    n = PICKLE_DIGEST_ITEMS + 1
    outputs = [
        [("a", str(i)) for i in range(n)],  # rows of strings
        [(i, 0.5) for i in range(n)],  # other rows: a pickle
        [(0.5, math.nan)] * n,  # rows with a NaN: their JSON
        [1, 2.5, "x"] * 5,  # anything else: its JSON
        [1, 2.5] * 5,  # scalars of one kind: a pickle
    ]
    digests = [encode_text(output, limit=10)[1][:16] for output in outputs]
    assert (FORMAT, digests) == (
        5,
        [
            "c4dd0a99a2371f2b",
            "91d0180a429fd09d",
            "e8f4513cde11db49",
            "a0c930fc589d4f0a",
            "2640bd00e3770378",
        ],
    ), "a digest changed: bump codec.FORMAT and write the new digests here"


class Small(int):  # an IntEnum-like subclass: encoded as its int
    pass


class Word(str):
    pass


def _large_outputs() -> list:
    """Outputs over a 100-character limit: lists and tuples of scalars in every form the codec
    meets them (exact types, subclasses, numpy, item by item), and near misses of each other."""
    import numpy as np

    n = 2000  # above the item-by-item threshold (1024)
    numbers = [1, 3, 2.0, 8.0, 3.0] * (n // 5)
    return [
        numbers,
        tuple(numbers),
        [float(x) for x in numbers],  # 2 is not 2.0 in JSON
        [*numbers[:-1], 3.0000000000000004],
        [-0.0 if x == 2.0 else x for x in numbers],
        list(range(n)),
        [Small(i) for i in range(n)],  # subclasses: encoded item by item
        np.arange(n),  # numpy: encoded whole, through tolist()
        [True] * n,
        [1] * n,
        ["a", "b"] * (n // 2),
        [Word("a"), Word("b")] * (n // 2),
        ["a", 1] * (n // 2),  # not one scalar type: the JSON digest
        [[1, 2]] * n,  # rows, not scalars
        [1, 2, 3] * 50,  # short: never item by item
        ([1, 2, 3] * 50)[:-1] + [3.0],
        [*numbers[:-1], math.nan],  # tagged: the JSON digest
        [*numbers[:-1], math.inf],
        [*numbers[:-1], 2**63],
        [*numbers[:-1], 1e300],  # in range as a float, beyond it beside ints
        [Small(1)] * DIGEST_CHUNK_ROWS
        + [0.5] * 12_000,  # more than one chunk, then ints and floats
        [Small(1)] * DIGEST_CHUNK_ROWS + [1e300] * 12_000,
        [1] * DIGEST_CHUNK_ROWS + [0.5] * 12_000,  # the same texts as the two above, exact types
        [1] * DIGEST_CHUNK_ROWS + [1e300] * 12_000,
        type("Listed", (list,), {})([1] * DIGEST_CHUNK_ROWS + [1e300] * 12_000),  # encoded whole
        type("Listed", (list,), {})(numbers),  # a list subclass: its items
        tuple(Small(i) for i in range(n)),
        list(range(1024)),  # the item-by-item threshold
        list(range(1025)),
        [Small(i) for i in range(1025)],
    ]


def test_a_large_output_has_one_digest_however_it_is_made_and_equal_only_for_equal_text():
    # with `large`, a list or tuple of scalars is digested without its text (a million floats:
    # 0.29 s of JSON against 0.02 s of pickle); the digest must be the one the text path gives,
    # for every form of the same value, or a correct program fails against its reference
    outputs = _large_outputs()
    texts = [json.dumps(encode(v)) for v in outputs]
    digests = [encode_text(v, limit=100)[1] for v in outputs]
    assert None not in digests
    for value, digest in zip(outputs, digests, strict=True):
        assert encode_text(value, limit=100, large=True)[1] == digest
    for i, j in itertools.combinations(range(len(outputs)), 2):
        assert (digests[i] == digests[j]) == (texts[i] == texts[j]), (i, j)
    assert digests[5] == digests[6] == digests[7] and digests[10] == digests[11]  # same text
    assert digests[0] == digests[-5] and digests[-2] == digests[-1]


def test_a_surrogate_pair_is_not_the_character_it_stands_for_once_digested():
    # JSON writes both as the same escape; Python's == (and EvalPlus) tells them apart, as the
    # digest does
    pair, character = ["\ud83d\ude00"] * 2000, ["\U0001f600"] * 2000
    assert json.dumps(pair) == json.dumps(character) and pair != character
    assert encode_text(pair, limit=100)[1] != encode_text(character, limit=100)[1]


def test_a_list_over_the_limit_by_its_closing_bracket_is_a_digest_in_every_form():
    n = 2000
    limit = len(json.dumps(list(range(n)))) - 1
    exact, items = (
        encode_text(list(range(n)), limit),
        encode_text([Small(i) for i in range(n)], limit),
    )
    assert exact[0] is None and exact == items
    tuple_limit = len(json.dumps(encode(tuple(range(n))))) - 2
    assert encode_text(tuple(range(n)), tuple_limit)[0] is None
    assert encode_text(tuple(range(n)), tuple_limit) == encode_text(
        tuple(Small(i) for i in range(n)), tuple_limit
    )
    assert encode_text(list(range(n)), limit + 1) == (json.dumps(list(range(n))), None)


def test_the_child_digests_a_long_list_without_its_text_only_when_the_test_is_marked_large():
    from corebench.harness.sandbox.child import output_fields

    numbers = [0.5] * 2000
    assert output_fields(numbers) == ({"status": "ok"}, json.dumps(numbers))
    fields, text = output_fields(numbers, large=True)
    assert text is None and fields == {"status": "ok", "digest": encode_text(numbers, 100)[1]}


def test_a_long_string_is_digested_as_the_sha256_of_its_json_text_whatever_it_holds():
    # plain printable ASCII is hashed without making its text; any other string is hashed from
    # json.dumps's text: both give that text's digest, from just over LONG_STRING_CHARS on
    n = LONG_STRING_CHARS - 2  # "a" * n in quotes is LONG_STRING_CHARS long: sent as text
    fillers = (" ", "7", "~", '"', "\\", "\x7f", "\n", "\x00", "é", "\ud800", "\U0001f600")
    values = ["a" * n, "a" * (n + 1), "ab" * n]
    values += [v for f in fillers for v in ("a" * (n - 1) + f, f + "a" * n, "a" * n + f)]
    digested = 0
    for value in values:
        text = json.dumps(value)
        if len(text) <= LONG_STRING_CHARS:
            assert encode_text(value, large=True) == (text, None)
        else:
            digested += 1
            assert encode_text(value, large=True) == (
                None,
                hashlib.sha256(text.encode()).hexdigest(),
            )
    assert digested == len(values) - 4  # "a" * n, and a one-character filler sent as it is
    # the characters hashed without their text are exactly those json.dumps leaves as they are
    for code in range(0x800):
        char = chr(code)
        assert (_bare_json("a" + char) is not None) == (json.dumps(char) == f'"{char}"'), code


def test_large_digests_only_long_lists_of_scalars():
    # one under the limit then reports a digest: its text could not be the expected one's, which
    # was over the limit, so it fails either way
    assert encode_text([0.5] * 2000, large=True) == encode_text([0.5] * 2000, limit=100)
    for value in ([0.5] * 1000, [[1, 2]] * 2000, ["a", 1] * 1000, "x" * 10, 7, {1: 2}):
        assert encode_text(value, large=True) == encode_text(value)


def test_rows_of_numbers_are_finite_unless_a_float_is_not():
    assert _flat_rows([(1, 0.5), (10**400, 2.0)])  # an int beyond floats is finite
    for odd in (math.inf, -math.inf, math.nan):
        assert not _flat_rows([(1, 0.5), (10**400, odd)])
        assert not _flat_rows([(1, 0.5), (2, odd)])
        assert not _flat_rows([("a", 0.5), ("b", odd)])
    assert _flat_rows([("a", 0.5), (None, 2.0)]) and not _flat_rows([(b"x", 0.5)])


def test_long_rows_have_one_digest_as_a_list_a_list_subclass_or_a_numpy_array():
    # more than 65,536 rows are digested whatever their size; a numpy array or a list subclass
    # of the same rows is encoded whole, and must give the same digest in and over the limit
    import numpy as np

    rows = [[i, 1] for i in range(PICKLE_DIGEST_ITEMS + 10)]
    for limit in (100, 10**9):
        digest = encode_text(rows, limit)[1]
        assert digest is not None
        assert encode_text(np.array(rows), limit)[1] == digest
        assert encode_text(type("Listed", (list,), {})(rows), limit)[1] == digest
        assert encode_text(np.array([*rows[:-1], [0, 1]]), limit)[1] != digest
