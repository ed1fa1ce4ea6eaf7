"""Code extraction on messy model answers (our own small corpus)."""

import pytest

from corebench.harness.extract import extract_code

CASES = [
    # (answer, entry point, expected substring or None when no code should be found)
    ("```python\ndef f(x):\n    return x + 1\n```", "f", "return x + 1"),
    (
        "Sure! Here it is:\n```py\nimport math\ndef f(x):\n    return math.sqrt(x)\n```\nHope it helps.",
        "f",
        "import math",
    ),
    (
        "<think>maybe def f(x): return 0</think>\n```python\ndef f(x):\n    return 2 * x\n```",
        "f",
        "return 2 * x",
    ),
    (
        "```python\ndef helper(y):\n    return y * 3\n```\nand\n```python\ndef f(x):\n    return helper(x)\n```",
        "f",
        "def helper",
    ),
    (
        "```python\ndef f(x):\n    return 1\n```\nBetter:\n```python\ndef f(x):\n    return 2\n```",
        "f",
        "return 2",
    ),
    ("def f(x):\n    return x - 1\n\nThis subtracts one.", "f", "return x - 1"),
    (
        "```python\ndef f(x):\n    total = 0\n    for i in range(x):\n        total += i\n    return total\n",
        "f",
        "total += i",
    ),  # truncated fence
    # the opening fence missing: the first fence closes the code (the prose after it is not code)
    (
        "def f(xs):\n    return min(xs)\n\nprint(f([3, 1]))  # Output: 1\n```\n\nThis "
        "function uses Python's built-in `min` function.",
        "f",
        "return min(xs)",
    ),
    (
        "def f(x):\n    return x\n```\nA faster one:\n```python\ndef f(x):\n    return 2 * x\n```",
        "f",
        "return 2 * x",
    ),
    ("I cannot help with that.", "f", None),
    ("<think>long reasoning that never ends", "f", None),
]


@pytest.mark.parametrize("answer, entry, expected", CASES)
def test_extraction(answer, entry, expected):
    extracted = extract_code(answer, entry)
    if expected is None:
        assert not extracted.found and extracted.code == ""
    else:
        assert extracted.found and expected in extracted.code
        compile(extracted.code, "<extracted>", "exec")


def test_wrong_entry_point_is_reported_not_renamed():
    extracted = extract_code("```python\ndef g(x):\n    return x\n```", "f")
    assert extracted.found and "does not define f" in extracted.note and "def g" in extracted.code


def test_whole_programs_keep_their_top_level_statements():
    answer = (
        "Read both numbers, then print the sum.\n```python\ndef helper():\n    return 0\n```\n"
        "Final program:\n```python\nimport sys\na, b = map(int, sys.stdin.read().split())\n"
        "print(a + b)\n```\nThis runs in O(1)."
    )
    program = extract_code(answer, None, program=True)
    assert program.found and program.code.rstrip().endswith("print(a + b)")
    assert "def helper" not in program.code  # the last block is the program
    assert extract_code("Just print it.", None, program=True).found is False


def test_leetcode_style_class_methods_are_found_by_their_class():
    answer = "```python\nfrom typing import List\nclass Solution:\n    def f(self, xs: List[int]) -> int:\n        return len(xs)\n```"
    extracted = extract_code(answer, "Solution.f")
    assert (
        extracted.found
        and extracted.note == "fenced"
        and "from typing import List" in extracted.code
    )


def _request(**kw):
    from corebench.harness import GenerationRequest, Message

    return GenerationRequest(messages=[Message(role="user", content="x")], max_new_tokens=8, **kw)


@pytest.mark.parametrize(
    ("answer", "kept"),
    [
        # the first complete Python block ends the answer; what follows is never read
        ("Here:\n```python\ndef f():\n    return 1\n```\nMore ```python\nx\n```", 41),
        ("```\ndef f():\n    return 1\n```\n\nExplanation", 29),
        # an unclosed block does not end it
        ("```python\ndef f():\n    return '```'", None),
    ],
)
def test_a_code_role_answer_ends_after_its_first_complete_python_block(answer, kept):
    from corebench.harness.backend import cut_at_stop
    from corebench.harness.extract import CLOSED_CODE_BLOCK

    text, stopped = cut_at_stop(answer, _request(stop_pattern=CLOSED_CODE_BLOCK))
    assert stopped is (kept is not None)
    assert text == (answer[:kept] if kept is not None else answer)


def test_stop_strings_cut_before_the_earliest_match():
    from corebench.harness.backend import cut_at_stop

    assert cut_at_stop("a; b. c;", _request(stop=[";", "."])) == ("a", True)
    assert cut_at_stop("abc", _request(stop=["x"])) == ("abc", False)


def test_the_planner_answer_ends_after_its_outline():
    import re

    from corebench.plugins.systems.corecode import OUTLINE_END

    plan = "Steps: 1. add\n**Complexity:** O(n) time\n\nHere is code:\n```python\n..."
    assert plan[: re.search(OUTLINE_END, plan).end()].endswith("O(n) time\n")
    assert re.search(OUTLINE_END, "Complexity:\n- O(n)\n") is None  # a heading alone: go on
