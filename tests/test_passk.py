import math
import subprocess
import sys
from math import comb

import pandas as pd
import pytest

from corebench.harness.summary import efficiency, pass_at_k


@pytest.mark.parametrize("n, c, k", [(10, 3, 1), (10, 3, 5), (5, 0, 2), (5, 5, 5), (20, 1, 10)])
def test_unbiased_estimator_matches_closed_form(n, c, k):
    frame = pd.DataFrame({"task_id": ["t"] * n, "passed": [True] * c + [False] * (n - c)})
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(frame, "passed", [k])[k] == pytest.approx(expected)


def test_k_larger_than_samples_is_left_out():
    frame = pd.DataFrame({"task_id": ["a", "a", "b", "b"], "passed": [True, False, False, False]})
    assert pass_at_k(frame, "passed", [1, 2, 5]) == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}


def test_k_larger_than_one_tasks_samples_is_left_out_for_all():
    rows = [{"task_id": "a", "passed": True}] * 2 + [{"task_id": "b", "passed": False}] * 3
    assert pass_at_k(rows, "passed", [1, 2, 3]) == {1: pytest.approx(0.5), 2: pytest.approx(0.5)}


def test_rows_and_their_frame_give_the_same_pass_at_k():
    rows = [
        {"task_id": t, "passed": p}
        for t, p in [
            ("a", True),
            ("a", False),
            ("a", True),
            ("b", False),
            ("b", False),
            ("b", True),
        ]
    ]
    for k in (1, 2, 3):
        assert pass_at_k(rows, "passed", [k]) == pass_at_k(pd.DataFrame(rows), "passed", [k])
    assert pass_at_k(rows, "passed", [2])[2] == pytest.approx((1 - 0 / 3 + 1 - 1 / 3) / 2)
    assert pass_at_k([], "passed", [1]) == {}


def test_efficiency_skips_unmeasured_rows_given_as_none_or_as_nan():
    measured = {
        "runtime_ratio": 2.0, "memory_ratio": 1.0, "eff_runtime_s": 4.0, "eff_ref_runtime_s": 2.0,
        "eff_peak": 8.0, "eff_ref_peak": 4.0,
    }  # fmt: skip
    unmeasured = dict.fromkeys(measured)  # None in rows; NaN once in a DataFrame
    rows = [measured, {**measured, "runtime_ratio": 4.0, "eff_runtime_s": 8.0}, unmeasured]
    expected = {
        "measured": 2,
        "runtime_ratio_median": 3.0,
        "memory_ratio_median": 1.0,
        "net": 12.0 / 4.0,
        "nmu": 16.0 / 8.0,
    }
    assert efficiency(rows) == expected
    assert efficiency(pd.DataFrame(rows)) == expected
    assert efficiency([unmeasured]) is None
    zero = {**measured, "eff_ref_runtime_s": 0.0, "eff_ref_peak": 0.0}
    assert math.isnan(efficiency([zero])["net"]) and math.isnan(efficiency([zero])["nmu"])


def test_the_summary_does_not_import_pandas():
    # a quarter of a second at the end of every evaluate, run and show
    code = "import sys, corebench.harness.summary; assert 'pandas' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
