"""Plain Python data <-> JSON for the sandbox: what crosses between the harness and the child.

Keeps tuples, sets, complex numbers, big integers, bytes and non-string dict keys; anything else
becomes an :class:`Opaque` (its type and repr), so decoding only ever builds built-in types and
never an object a program defined. Large outputs travel as a :class:`Digest` of their canonical
encoding. Standard library only: the child imports it.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import sys

MAX_DEPTH = 100
_BIG = 2**63  # integers JSON holds as they are (larger ones are tagged)
_PLAIN = frozenset({str, int, float, bool, type(None)})  # scalars JSON holds as they are


class Opaque:
    """A decoded value that was not plain data (only its type and repr were kept)."""

    __slots__ = ("type", "repr")

    def __init__(self, type_name: str, text: str):
        self.type, self.repr = type_name, text

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Opaque) and (self.type, self.repr) == (other.type, other.repr)

    def __hash__(self) -> int:
        return hash((self.type, self.repr))

    def __repr__(self) -> str:
        return f"<{self.type} {self.repr}>"


class Digest:
    """A decoded output too large to report: the sha256 of its canonical encoding."""

    __slots__ = ("hex",)

    def __init__(self, hex_digest: str):
        self.hex = hex_digest

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Digest) and self.hex == other.hex

    def __hash__(self) -> int:
        return hash(self.hex)

    def __repr__(self) -> str:
        return f"<output with sha256 {self.hex[:12]}…>"


def reported_output(event: dict):
    """The output of a test event: decoded plain data, or a Digest for a large one. A reported
    output is the JSON text the child sent (``protocol.parse_event``), decoded here."""
    if "digest" in event:
        return Digest(str(event["digest"]))
    text = event.get("output")
    return decode(None if text is None else json.loads(text))


def equal_texts(text: bytes, other: bytes) -> bool:
    """Whether two encoded outputs are the same text of a value equal to itself: then both
    decode to equal values, with no decoding."""
    return text == other and equal_to_itself(text)


def equal_to_itself(text: bytes) -> bool:
    """Whether an encoded output decodes to a value equal to itself: NaN (encoded
    ``{"$": "float", "v": "nan"}``) is the one value this encoding holds that is not."""
    return b'"nan"' not in text and b"NaN" not in text


# --- codec: plain Python data <-> JSON, keeping tuples, sets, complex, non-str keys ----------------
INLINE_OUTPUT_CHARS = 8 * 1024 * 1024  # larger outputs are reported as a digest of their encoding
# a string output whose text is longer travels as a digest when its test is marked ``large``: the
# harness marks a test so when the expected output is such a string and the comparator accepts
# only an equal string (``Comparator.exact_for_strings``)
LONG_STRING_CHARS = 64 * 1024
_FLAT_TYPES = ({str}, {bool}, {type(None)})


_INT, _FLOAT, _NUMBERS = {int}, {float}, {int, float}


def _flat(items):
    """``items`` as a list when every element is a JSON scalar that needs no tag (fast path, in C)."""
    types = set(map(type, items))
    if not types or types in _FLAT_TYPES:
        return list(items)
    if types == _INT and min(items) > -_BIG and max(items) < _BIG:
        return list(items)
    if types == _FLOAT and all(map(math.isfinite, items)):
        return list(items)
    if types == _NUMBERS:  # JSON keeps them apart (a float's text has a "." or an exponent)
        try:  # finite first: NaN makes min and max meaningless; an int beyond floats overflows
            if all(map(math.isfinite, items)) and min(items) > -_BIG and max(items) < _BIG:
                return list(items)
        except OverflowError:
            pass
    return None


def _flat_lists(items):
    """A copy of ``items`` when every item is an exact list of untagged scalars (in C), else None:
    such a list of lists is its own encoding."""
    if type(items) is not list or not items or set(map(type, items)) != {list}:
        return None
    if _flat(list(itertools.chain.from_iterable(items))) is None:
        return None
    return list(map(list.copy, items))


def _sorted_by_text(encoded):
    """Canonical order for unordered containers, so equal values encode (and hash) equally."""
    return sorted(encoded, key=lambda e: json.dumps(e))


def encode(value, depth: int = 0):
    kind = type(value)  # the exact built-in types first: most of what is encoded
    if kind is str or kind is bool or value is None:
        return value
    if kind is int and -_BIG < value < _BIG:
        return value
    if depth > MAX_DEPTH:
        raise ValueError("value nested too deeply")
    d = depth + 1
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        value = int.__int__(value)
        return value if abs(value) < 2**63 else {"$": "bigint", "v": hex(value)}
    if isinstance(value, float):
        value = float.__float__(value)
        return value if math.isfinite(value) else {"$": "float", "v": repr(value)}
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, complex):
        return {"$": "complex", "v": [encode(value.real, d), encode(value.imag, d)]}
    if isinstance(value, list):
        flat = (_flat(value) or _flat_lists(value)) if type(value) is list else None
        return flat if flat is not None else [encode(v, d) for v in list.__iter__(value)]
    if isinstance(value, tuple):
        flat = _flat(value) if type(value) is tuple else None
        return {
            "$": "tuple",
            "v": flat if flat is not None else [encode(v, d) for v in tuple.__iter__(value)],
        }
    if isinstance(value, frozenset):
        return {
            "$": "frozenset",
            "v": _sorted_by_text(encode(v, d) for v in frozenset.__iter__(value)),
        }
    if isinstance(value, set):
        return {"$": "set", "v": _sorted_by_text(encode(v, d) for v in set.__iter__(value))}
    if isinstance(value, dict):
        pairs = [[encode(k, d), encode(v, d)] for k, v in dict.items(value)]
        return {"$": "dict", "v": sorted(pairs, key=lambda kv: json.dumps(kv[0]))}
    if isinstance(value, (bytes, bytearray)):
        return {"$": "bytes", "v": bytes(value).hex()}
    if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
        return encode(value.tolist(), d)
    try:
        text = repr(value)[:1000]
    except BaseException:  # noqa: BLE001
        text = "?"
    return {
        "$": "opaque",
        "type": f"{type(value).__module__}.{type(value).__qualname__}",
        "r": text,
    }


PICKLE_DIGEST_ITEMS = 65_536  # longer outputs made of flat rows are hashed without JSON
DIGEST_CHUNK_ROWS = 10_000  # rows hashed at a time, so no second copy of a huge output exists
FORMAT = 5  # bump when an output's digest changes: cached reference digests are then recomputed


def _flat_rows(value) -> bool:
    """Every item (each an exact tuple or list) holds untagged scalars: strings, ints, finite
    floats, bools, None (at C speed)."""
    types = set(map(type, itertools.chain.from_iterable(value)))
    if not _PLAIN.issuperset(types):
        return False
    if float not in types:
        return True
    if types <= _NUMBERS:  # isfinite takes ints too, in C (MBPP+'s rows of floats: 5x faster)
        with contextlib.suppress(OverflowError):  # an int too large for a float: finite
            return all(map(math.isfinite, itertools.chain.from_iterable(value)))
    floats = (v for v in itertools.chain.from_iterable(value) if type(v) is float)
    return all(map(math.isfinite, floats))


def _text_rows_digest(value, row_types: set[type]) -> str | None:
    """sha256 of rows of strings (all tuples or all lists), or None for any other output.

    Hashes the row type, each row's length, then every string followed by a NUL: that
    determines the rows exactly, as long as no string holds a NUL (then None). ``str.join``
    checks the items' types on the way, at C speed, so no separate pass over them is needed; a
    str subclass counts as its text, as :func:`encode` has it.
    """
    import array
    import hashlib  # imported where needed: every child start would pay for them

    if len(row_types) != 1:
        return None
    lengths = array.array("q", map(len, value))
    if sys.byteorder == "big":
        lengths.byteswap()
    row_type = next(iter(row_types)).__name__
    hasher = hashlib.sha256(f"text-rows-v1:{type(value).__name__}:{row_type}:".encode())
    hasher.update(lengths.tobytes())
    for start in range(0, len(value), DIGEST_CHUNK_ROWS):
        chunk = value[start : start + DIGEST_CHUNK_ROWS]
        try:
            text = "\0".join(itertools.chain.from_iterable(chunk))
        except TypeError:  # an item that is not a string
            return None
        items = sum(lengths[start : start + DIGEST_CHUNK_ROWS])
        if not items:
            continue
        if text.count("\0") != items - 1:  # a string holding a NUL: the split would be ambiguous
            return None
        hasher.update(text.encode("utf-8", "surrogatepass"))
        hasher.update(b"\0")
    return hasher.hexdigest()


def _pickled(chunk) -> bytes:
    """A memo-free pickle: equal plain values give equal bytes whatever object identity they
    have, and tuples differ from lists."""
    import io
    import pickle

    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=4)
    pickler.fast = True  # no memo: canonical for trees of plain values
    pickler.dump(chunk)
    return buffer.getvalue()


def _pickle_hasher(container: str):
    import hashlib

    return hashlib.sha256(f"pickle-v1:{container}:".encode())


def _pickle_digest(value, container: str | None = None) -> str:
    """sha256 of ``value`` pickled DIGEST_CHUNK_ROWS items at a time (``container`` names the
    type when ``value`` is a list of a tuple's items). Ten times faster than JSON for rows of
    scalars."""
    hasher = _pickle_hasher(container or type(value).__name__)
    for start in range(0, len(value), DIGEST_CHUNK_ROWS):
        hasher.update(_pickled(value[start : start + DIGEST_CHUNK_ROWS]))
    return hasher.hexdigest()


def _rows_digest(value) -> str | None:
    """The digest of a long output made of flat rows of untagged scalars (finite floats: JSON
    has one NaN, a pickle would keep its bits); None for any other output."""
    if type(value) not in (list, tuple) or len(value) <= PICKLE_DIGEST_ITEMS:
        return None
    row_types = set(map(type, value))
    if not row_types <= {tuple, list}:
        return None
    digest = _text_rows_digest(value, row_types)
    return digest if digest is not None or not _flat_rows(value) else _pickle_digest(value)


_NUMBER_KINDS = (_INT, _FLOAT, _NUMBERS)


def _flat_form(encoded) -> tuple[str, list] | None:
    """("list" or "tuple", items) when an encoded output is a list or tuple of untagged scalars
    of one kind (``_flat``), else None."""
    kind, items = "list", encoded
    if type(encoded) is dict and encoded.get("$") == "tuple":
        kind, items = "tuple", encoded.get("v")
    if type(items) is not list or _flat(items) is None:
        return None
    return kind, items


class _FlatItems:
    """A long list's or tuple's encoded items, fed one at a time (a list of IntEnum members is
    encoded item by item): their :func:`_pickle_digest` if they turn out to be untagged scalars
    of one kind (``_flat`` of them all), taken DIGEST_CHUNK_ROWS at a time, so no second copy of
    the output exists."""

    def __init__(self, container: str):
        self.hasher = _pickle_hasher(container)
        self.chunk: list = []
        self.types: set[type] = set()
        self.low = self.high = 0  # over the numbers: _flat bounds a mix of ints and floats

    def add(self, encoded) -> None:
        if self.hasher is None:
            return
        if type(encoded) not in _PLAIN:  # a tagged value or a container
            self.hasher = None
            return
        self.chunk.append(encoded)
        if len(self.chunk) == DIGEST_CHUNK_ROWS:
            self._flush()

    def _flush(self) -> None:
        chunk, self.chunk = self.chunk, []
        if _flat(chunk) is None:
            self.hasher = None
            return
        types = set(map(type, chunk))
        self.types |= types
        if types in _NUMBER_KINDS:
            self.low, self.high = min(self.low, min(chunk)), max(self.high, max(chunk))
        self.hasher.update(_pickled(chunk))

    def digest(self) -> str | None:
        if self.hasher is not None and self.chunk:
            self._flush()
        if self.hasher is None or self.types not in (*_FLAT_TYPES, *_NUMBER_KINDS):
            return None
        if self.types == _NUMBERS and not -_BIG < self.low <= self.high < _BIG:
            return None
        return self.hasher.hexdigest()


_BARE = bytes(c for c in range(0x20, 0x7F) if c not in b'"\\')  # what json.dumps leaves as it is


def _bare_json(text: str) -> bytes | None:
    """``text`` as ASCII bytes when ``json.dumps`` writes it as it is, in quotes: printable ASCII
    (space to tilde) without a quote or backslash; else None. At C speed, 1 ns a character with
    the hashing, against 2.5 for json.dumps's text (``str.isprintable`` alone takes 2)."""
    if not text.isascii():
        return None
    data = text.encode("ascii")
    return None if data.translate(None, _BARE) else data


def encode_text(
    value, limit: int = INLINE_OUTPUT_CHARS, large: bool = False
) -> tuple[str | None, str | None]:
    """(JSON text, None) for an output, or (None, its digest) when that text exceeds ``limit``.

    The digest of a list or tuple of untagged scalars of one kind is a pickle's (``_flat_form``,
    ``_FlatItems``), the same however the list was made (exact types, subclasses, numpy), and
    equal exactly when the items are equal values of the same types, as their JSON texts are
    (but for a string holding a surrogate pair, which JSON writes as the character it stands
    for and the digest, like Python's ``==``, keeps apart). With ``large`` (only an output
    identical to the expected one passes: that one was too large to send, or is a long string
    judged by a comparator exact for strings) a long list is digested without making its text,
    which for a million floats costs ten times the pickle, and a string whose text is longer than
    LONG_STRING_CHARS is digested as the sha256 of that text. Long top-level lists and tuples are
    encoded item by item, so a huge output never exists twice in memory; the text is the same as
    ``json.dumps(encode(value))`` would give.
    """
    kind = type(value)
    bare = (
        _bare_json(value) if large and kind is str and len(value) + 2 > LONG_STRING_CHARS else None
    )
    if bare is not None:
        import hashlib  # the text is the string in quotes: hashed without making it

        hasher = hashlib.sha256(b'"')
        hasher.update(bare)
        hasher.update(b'"')
        return None, hasher.hexdigest()
    if kind is str or kind is bool or value is None or (kind is int and -_BIG < value < _BIG):
        text = json.dumps(value)  # a scalar: what every other test of most tasks returns
        if len(text) <= (LONG_STRING_CHARS if large and kind is str else limit):
            return text, None
        import hashlib

        return None, hashlib.sha256(text.encode()).hexdigest()
    long = kind in (list, tuple) and len(value) > 1024
    scalars = _flat(value) if long else None  # in C
    if scalars is not None and large:
        return None, _pickle_digest(scalars, kind.__name__)
    digest = _rows_digest(value) if scalars is None else None  # rows are lists or tuples
    if digest is not None:
        return None, digest
    whole = _flat_lists(value) if long and scalars is None else scalars
    flat = None
    if long and whole is None:
        head, tail = ("[", "]") if kind is list else ('{"$": "tuple", "v": [', "]}")
        flat = _FlatItems(kind.__name__)

        def item_texts():
            for item in value:
                encoded = encode(item, 1)
                flat.add(encoded)
                yield json.dumps(encoded)

        items = item_texts()
    else:
        if whole is None:
            whole = encode(value)
            # a numpy array or a list subclass of long rows: digested as the same rows would be
            digest = _rows_digest(whole) if type(whole) is list else None
            if digest is not None:
                return None, digest
        elif kind is tuple:
            whole = {"$": "tuple", "v": whole}
        text = json.dumps(whole)
        if len(text) <= limit:  # one piece, within the limit: the output's text as it is
            return text, None
        # a list of scalars is known flat already (``scalars``): no second pass over it
        form = (kind.__name__, scalars) if scalars is not None else _flat_form(whole)
        if form is not None:
            return None, _pickle_digest(form[1], form[0])
        head, tail, items = "", "", iter((text,))
    import hashlib

    parts, size, hasher = [head], len(head), None
    for i, text in enumerate(items):
        piece = text if i == 0 else ", " + text
        size += len(piece)
        if hasher is None:
            parts.append(piece)
            if size > limit:
                hasher = hashlib.sha256("".join(parts).encode())
                parts = []
        else:
            hasher.update(piece.encode())
    if hasher is None and size + len(tail) <= limit:
        return "".join(parts) + tail, None
    digest = flat.digest() if flat is not None else None
    if digest is not None:
        return None, digest
    if hasher is None:  # over the limit by its closing bracket
        hasher = hashlib.sha256("".join(parts).encode())
    hasher.update(tail.encode())
    return None, hasher.hexdigest()


def decode(data):
    """Rebuild plain Python values (only built-in types; never anything the solution defined)."""
    if isinstance(data, list):
        if _PLAIN.issuperset(map(type, data)):  # only scalars: a copy at C speed
            return data[:]  # a new list every time (a program may change its arguments)
        return [decode(v) for v in data]
    if not isinstance(data, dict):
        return data
    tag, v = data.get("$"), data.get("v")
    if tag == "tuple":
        return tuple(v) if _PLAIN.issuperset(map(type, v)) else tuple(decode(x) for x in v)
    if tag == "set":
        return {decode(x) for x in v}
    if tag == "frozenset":
        return frozenset(decode(x) for x in v)
    if tag == "dict":
        return {decode(k): decode(x) for k, x in v}
    if tag == "complex":
        return complex(decode(v[0]), decode(v[1]))
    if tag == "bigint":
        return int(v, 16)
    if tag == "float":
        return float(v)
    if tag == "bytes":
        return bytes.fromhex(v)
    if tag == "opaque":
        return Opaque(str(data.get("type")), str(data.get("r")))
    raise ValueError(f"unknown tag {tag!r}")
