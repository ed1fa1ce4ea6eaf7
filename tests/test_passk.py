from math import comb

import pandas as pd
import pytest

from corebench.harness.summary import pass_at_k


@pytest.mark.parametrize("n, c, k", [(10, 3, 1), (10, 3, 5), (5, 0, 2), (5, 5, 5), (20, 1, 10)])
def test_unbiased_estimator_matches_closed_form(n, c, k):
    frame = pd.DataFrame({"task_id": ["t"] * n, "passed": [True] * c + [False] * (n - c)})
    expected = 1 - comb(n - c, k) / comb(n, k)
    assert pass_at_k(frame, "passed", [k])[k] == pytest.approx(expected)


def test_k_larger_than_samples_is_left_out():
    frame = pd.DataFrame({"task_id": ["a", "a", "b", "b"], "passed": [True, False, False, False]})
    assert pass_at_k(frame, "passed", [1, 2, 5]) == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
