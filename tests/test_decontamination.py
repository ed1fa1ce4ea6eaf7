"""Near-duplicate decontamination: the pairs a reviewer found between MBPP's training tasks and
MBPP+, constructed pairs for each criterion, thresholds as settings, the command's lines, and
training that leaves the flagged tasks out and says how many each criterion caught."""

from __future__ import annotations

import subprocess
import sys

import pytest

from corebench.harness.registry import default_plugins
from corebench.training.contamination import (
    ContaminationError,
    Item,
    Thresholds,
    check,
    code_tokens,
    description,
    excluded_by,
    items,
    near_duplicates,
    signatures,
)
from corebench.training.data import load_train_data
from corebench.training.settings import load_settings

CLI = [sys.executable, "-m", "corebench.harness.cli"]
EVERY_SPLIT = ["train", "validation", "test", "prompt"]


@pytest.fixture(scope="module")
def mbpp_items(data_dir):
    plugins = default_plugins()
    original = plugins.benchmarks.get("mbpp-original").component(data_dir)
    train = [item for split in EVERY_SPLIT for item in items(original, split)]
    evaluation = items(plugins.benchmarks.get("mbpp").component(data_dir), "test")
    return train, evaluation


def flagged(flags, train_id, eval_id):
    return {
        (f.criterion, round(f.score, 3))
        for f in flags
        if (f.train_id, f.eval_id) == (train_id, eval_id)
    }


def test_the_reviewers_mbpp_pairs_are_flagged(mbpp_items):
    """Train Mbpp/199 and eval Mbpp/388 share all three asserts (highest_Power_of_2); train
    Mbpp/779 and eval Mbpp/758 are one function (unique_sublists) with two of three asserts
    shared. Every MBPP+ task is flagged by id against its own original."""
    train, evaluation = mbpp_items
    flags = near_duplicates(train, evaluation)
    assert flagged(flags, "Mbpp/199", "Mbpp/388") >= {("tests", 1.0), ("name", 1.0)}
    assert flagged(flags, "Mbpp/779", "Mbpp/758") >= {("tests", 0.667), ("name", 0.667)}
    counts = excluded_by(flags)
    assert counts["id"] == 378  # MBPP+ draws its ids from the whole of MBPP
    others = {f.train_id for f in flags} - {f.train_id for f in flags if f.criterion == "id"}
    assert 50 <= len(others) <= 100  # the ~70 near variants beyond the shared ids


def test_each_criterion_on_constructed_pairs():
    reference = "def add_up(numbers):\n    total = 0\n    for n in numbers:\n        total += n\n    return total\n"
    renamed = "def summe(xs):\n    '''doc'''\n    acc = 0\n    for x in xs:\n        acc += x\n    return acc\n"
    other = "def reverse(text):\n    return ' '.join(text.split()[::-1])\n"
    assert code_tokens(reference) == code_tokens(renamed)  # names and docstrings do not count
    assert code_tokens(reference) != code_tokens(other) and code_tokens("def (") == ()
    words = description(
        '"""\nWrite a function to sum the numbers of a list.\nassert add_up([1]) == 1\n"""\n'
    )
    assert words == "write a function to sum the numbers of a list"

    def item(task_id, text, code, tests, name):
        return Item(task_id, description(text), code_tokens(code), frozenset(tests), name)

    evaluation = [item("E/1", "Write a function to sum the numbers of a list.", reference,
                       {"a", "b", "c"}, "add_up")]  # fmt: skip
    train = [
        item("T/prose", "write a function to sum the numbers of the list", other, set(), "f"),
        item("T/code", "Compute something unrelated entirely here.", renamed, set(), "g"),
        item("T/tests", "Count the vowels of a word.", other, {"a", "b", "x"}, "h"),
        item("T/name", "Count the vowels of a word.", other, {"c", "y", "z"}, "add_up"),
        item("T/fresh", "Count the vowels of a word.", other, {"c", "y", "z"}, "vowels"),
        item("E/1", "nothing alike", other, set(), "k"),
    ]
    flags = near_duplicates(train, evaluation)
    criteria = {(f.train_id, f.criterion) for f in flags}
    assert criteria == {("T/prose", "description"), ("T/code", "code"), ("T/tests", "tests"),
                        ("T/name", "name"), ("E/1", "id")}  # fmt: skip
    assert next(f for f in flags if f.criterion == "code").score == 1.0
    # thresholds are settings: stricter ones flag less, looser ones more
    strict = near_duplicates(train, evaluation, Thresholds(description=1.0, code=1.0, tests=1.0))
    assert {(f.train_id, f.criterion) for f in strict} == {("T/code", "code"), ("T/name", "name"),
                                                           ("E/1", "id")}  # fmt: skip
    # a looser share flags more, but never on one identical test alone
    two = item("T/two", "Count the vowels of a word.", other, {"a", "b", "p", "q", "r"}, "v")
    loose = near_duplicates([*train, two], evaluation, Thresholds(tests=0.3))
    assert ("T/two", "tests") in {(f.train_id, f.criterion) for f in loose}
    assert ("T/two", "tests") not in {
        (f.train_id, f.criterion) for f in near_duplicates([two], evaluation)
    }
    assert ("T/name", "tests") not in {(f.train_id, f.criterion) for f in loose}  # 1 of 3 shared
    with pytest.raises(ContaminationError, match="5 training tasks are near duplicates"):
        check(train, evaluation)
    assert check(train[4:5], evaluation) == []


def test_signatures_match_asserts_with_calls_and_outputs():
    """An assert's tested call and value equal a call-mode test with its reference output:
    tuples and lists alike, sets in any order."""
    from corebench.harness.testsuite import FunctionalSuite, assert_suite

    asserts = assert_suite(["assert set(f((3, 4), [5])) == {4, 3}", "assert f([1], 2) == [1, 2]"])
    called = FunctionalSuite("f", "", {"base": [[(3, 4), [5]], [[1], 2]]})
    from_asserts = signatures(asserts, asserts.expected["base"])
    assert from_asserts == signatures(called, [{3, 4}, [1, 2]])
    assert len(from_asserts) == 2
    # an assert whose value is no literal states it as written, not as True
    pi = assert_suite(["assert f(1) == math.pi", "assert f(2) == 2 * math.pi"])
    tau = assert_suite(["assert f(1) == math.tau", "assert f(2) == 2 * math.tau"])
    assert pi.expected["base"] == [True, True]
    assert signatures(pi, pi.expected["base"]) != signatures(tau, tau.expected["base"])
    assert len(signatures(pi, pi.expected["base"])) == 2


def test_the_command_prints_one_line_per_flagged_pair(data_dir):
    done = subprocess.run(
        [*CLI, "decontaminate", "--train", "mbpp-original:train,validation,test,prompt",
         "--eval", "mbpp", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert "Mbpp/199 Mbpp/388 tests 1.000" in lines and "Mbpp/779 Mbpp/758 name 0.667" in lines
    for line in lines:
        train_id, eval_id, criterion, score = line.split(" ")
        assert criterion in ("id", "description", "code", "tests", "name")
        assert 0 < float(score) <= 1
    assert "training tasks flagged against 378 evaluation tasks (id 378," in done.stderr
    stricter = subprocess.run(
        [*CLI, "decontaminate", "--train", "mbpp-original:train", "--eval", "mbpp", "--tests",
         "1", "--description", "1", "--code", "1", "--data-dir", str(data_dir)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert stricter.returncode == 0 and "tests 0.667" not in stricter.stdout
    unknown = subprocess.run(
        [*CLI, "decontaminate", "--train", "mbpp-original:trian", "--eval", "mbpp",
         "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert unknown.returncode != 0 and "Did you mean 'train'" in unknown.stderr


def test_training_leaves_out_near_duplicates_and_counts_them_by_criterion(data_dir):
    settings = load_settings(
        "sft", None, data_dir=str(data_dir), benchmark_options={"train_from": EVERY_SPLIT}
    )
    data = load_train_data(settings)
    used = {t.task.task_id for t in data.tasks}
    flagged_ids = {o.train_id for o in data.overlaps}
    assert "Mbpp/199" in flagged_ids and "Mbpp/779" in flagged_ids and not used & flagged_ids
    counts = excluded_by(data.overlaps)
    assert counts["tests"] > 0 and counts["description"] > 0 and counts["id"] == 0
    assert 450 <= len(used) <= 540  # the 543 of the 8-gram check, less ~70 near variants
    # looser thresholds leave more tasks in
    kept = load_settings(
        "sft", None, data_dir=str(data_dir), benchmark_options={"train_from": EVERY_SPLIT},
        decontaminate_description=1.0, decontaminate_code=1.0, decontaminate_tests=1.0,
    )  # fmt: skip
    assert len(load_train_data(kept).tasks) > len(used)
