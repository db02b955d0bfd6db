import numpy as np
import pytest

from rankopt import RankoptInputError, check_matrix, check_order, invert
from rankopt._validation import check_options, check_positive


def test_valid_matrix_is_copied_with_zero_diagonal():
    a = np.array([[5, 1], [2, 7]])
    out = check_matrix(a)
    assert out.dtype == np.float64 and out.flags.c_contiguous
    assert out.tolist() == [[0, 1], [2, 0]]
    assert a[0, 0] == 5  # input untouched


def test_asymmetric_is_legal():
    out = check_matrix([[0, 1, 2], [3, 0, 4], [5, 6, 0]])
    assert out[0, 1] != out[1, 0]


@pytest.mark.parametrize(
    "value, match",
    [
        ([["a", "b"], ["c", "d"]], r"`latency` must be a numeric array; got dtype <U1"),
        (np.array([[1 + 1j, 0], [0, 0]]), r"`latency` must be real"),
        (np.zeros(4), r"`latency` must be a 2-D array; got 1-D with shape \(4,\)"),
        (np.zeros((2, 3)), r"`latency` must be square; got shape \(2, 3\)"),
        (np.zeros((1, 1)), r"at least 2 processes; got shape \(1, 1\)"),
        (np.array([[0, np.inf], [1, 0]]), r"`latency` must be finite; latency\[0, 1\] is inf"),
        (np.array([[0, 1], [np.nan, 0]]), r"latency\[1, 0\] is nan \(1 missing entries"),
        (np.array([[0, -1.5], [1, 0]]), r"must be non-negative; latency\[0, 1\] is -1.5"),
    ],
)
def test_matrix_errors(value, match):
    with pytest.raises(RankoptInputError, match=match):
        check_matrix(value)


def test_error_is_value_error_and_names_argument():
    with pytest.raises(ValueError, match=r"`bandwidth` must be square"):
        check_matrix(np.zeros((3, 2)), "bandwidth")


def test_ragged_input():
    with pytest.raises(RankoptInputError, match=r"`latency` must be a numeric array"):
        check_matrix([[0, 1], [2]])


def test_zero_bandwidth_rejected():
    with pytest.raises(
        RankoptInputError, match=r"must be positive off the diagonal; bandwidth\[1, 0\] is 0"
    ):
        check_matrix([[0, 1], [0, 0]], "bandwidth", allow_zero=False)


def test_nan_policies():
    a = np.array([[0, 1, np.nan], [2, 0, 3], [4, np.nan, 0]])
    sym = check_matrix(a, nan="symmetric")
    assert sym[0, 2] == 4 and sym[2, 1] == 3
    both = np.array([[0, np.nan, 1], [np.nan, 0, 2], [1, 2, 0]])
    with pytest.raises(
        RankoptInputError, match=r"missing in both directions; latency\[0, 1\] and latency\[1, 0\]"
    ):
        check_matrix(both, nan="symmetric")
    assert check_matrix(both, nan="max")[0, 1] == 2
    assert check_matrix(both, nan="mean")[1, 0] == pytest.approx(1.5)
    with pytest.raises(RankoptInputError, match=r"`nan` must be one of 'raise', 'symmetric'"):
        check_matrix(both, nan="drop")


def test_all_missing():
    with pytest.raises(RankoptInputError, match="no measured off-diagonal entry"):
        check_matrix(np.full((3, 3), np.nan), nan="max")


@pytest.mark.parametrize(
    "order, match",
    [
        ([[0, 1]], r"`order` must be a 1-D array; got 2-D"),
        ([0.5, 1], r"`order` must hold integers; got dtype float64"),
        ([0, 1], r"`order` must have length 3 \(one entry per process\); got 2"),
        ([0, 1, 3], r"permutation of 0..2; order\[2\] is 3"),
        ([0, -1, 2], r"permutation of 0..2; order\[1\] is -1"),
        ([0, 1, 1], r"permutation of 0..2; 1 appears at positions \[1, 2\]"),
    ],
)
def test_order_errors(order, match):
    with pytest.raises(RankoptInputError, match=match):
        check_order(order, 3)


def test_invert_roundtrip():
    order = np.array([3, 0, 2, 1])
    rank_of = invert(order)
    assert (rank_of[order] == np.arange(4)).all()
    assert (invert(rank_of) == order).all()


def test_check_positive_and_options():
    assert check_positive(2, "max_iter", integer=True) == 2
    with pytest.raises(RankoptInputError, match=r"`max_iter` must be an integer; got 2.5"):
        check_positive(2.5, "max_iter", integer=True)
    with pytest.raises(
        RankoptInputError, match=r"`time_limit` must be positive and finite; got -1"
    ):
        check_positive(-1, "time_limit")
    with pytest.raises(RankoptInputError, match=r"`time_limit` must be a number; got True"):
        check_positive(True, "time_limit")
    with pytest.raises(RankoptInputError, match=r"`method` must be one of 'a', 'b'; got 'c'"):
        check_options("method", "c", ("a", "b"))
