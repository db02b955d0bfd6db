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


# --- the valid range and the bad-input classes (issue: kernels and validation)


@pytest.mark.parametrize(
    "value, match",
    [
        (1e308, r"`latency` must be at most 1e\+06 s; latency\[0, 1\] is 1e\+308 \(values are s"),
        (1e6 * (1 + 1e-15), r"`latency` must be at most 1e\+06 s; latency\[0, 1\] is 1e\+06"),
    ],
)
def test_latency_above_range(value, match):
    a = np.full((5, 5), 1e-6)
    a[0, 1] = value
    with pytest.raises(RankoptInputError, match=match):
        check_matrix(a)


def test_range_check_does_not_overflow():
    # the sum of the matrix overflows; the range check names the first entry
    with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] is 1e\+308"):
        check_matrix(np.full((5, 5), 1e308))
    m = np.where(np.arange(25).reshape(5, 5) % 2, 1e308, 1e-6)
    with pytest.raises(RankoptInputError, match=r"at most 1e\+06 s; latency\[0, 1\] is 1e\+308"):
        check_matrix(m, nan="symmetric")


def test_range_bounds_are_accepted():
    a = np.full((4, 4), 1e6)
    a[0, 1] = 0.0
    a[1, 0] = 5e-324
    out = check_matrix(a)
    assert out[0, 1] == 0 and out[1, 0] == 5e-324 and out.max() == 1e6
    np.fill_diagonal(a, np.inf)  # the diagonal is ignored
    assert check_matrix(a)[0, 0] == 0


def test_range_checked_before_nan_fill():
    a = np.array([[0, np.nan, 1], [2e6, 0, np.nan], [1, 1, 0]])
    with pytest.raises(RankoptInputError, match=r"latency\[1, 0\] is 2e\+06"):
        check_matrix(a, nan="mean")


@pytest.mark.parametrize(
    "value, match",
    [
        (1e16, r"`bandwidth` must be at most 1e\+15 B/s; bandwidth\[0, 1\] is 1e\+16"),
        (1e-4, r"`bandwidth` must be at least 0.001 B/s off the diagonal; bandwidth\[0, 1\] is"),
        (0.0, r"`bandwidth` must be positive off the diagonal; bandwidth\[0, 1\] is 0"),
        (-1.0, r"`bandwidth` must be non-negative; bandwidth\[0, 1\] is -1.0"),
    ],
)
def test_bandwidth_range(value, match):
    b = np.full((3, 3), 1e9)
    b[0, 1] = value
    with pytest.raises(RankoptInputError, match=match):
        check_matrix(b, "bandwidth", quantity="bandwidth")
    with pytest.raises(RankoptInputError, match=match):  # allow_zero=False means bandwidth
        check_matrix(b, "bandwidth", allow_zero=False)
    b[0, 1] = 1e15
    assert check_matrix(b, "bandwidth", quantity="bandwidth")[0, 1] == 1e15


def test_scalar_quantities():
    from rankopt._validation import check_quantity

    assert check_quantity(1e-3, "bandwidth", "bandwidth") == 1e-3
    assert check_quantity(1e18, "nbytes", "nbytes") == 1e18
    with pytest.raises(
        RankoptInputError, match=r"`nbytes` must be at most 1e\+18 bytes; got 1e\+19"
    ):
        check_quantity(1e19, "nbytes", "nbytes")
    with pytest.raises(
        RankoptInputError, match=r"`bandwidth` must be at least 0.001 B/s; got 1e-09"
    ):
        check_quantity(1e-9, "bandwidth", "bandwidth")
    with pytest.raises(RankoptInputError, match=r"`nbytes` must be positive and finite; got inf"):
        check_quantity(float("inf"), "nbytes", "nbytes")


def test_model_arguments_use_the_ranges():
    import rankopt

    lat = np.full((4, 4), 1e-5)
    with pytest.raises(
        RankoptInputError, match=r"`bandwidth` must be at least 0.001 B/s; got 1e-300"
    ):
        rankopt.cost(lat, np.arange(4), objective="time", bandwidth=1e-300, nbytes=1e6)
    with pytest.raises(
        RankoptInputError, match=r"`nbytes` must be at most 1e\+18 bytes; got 1e\+300"
    ):
        rankopt.cost(lat, np.arange(4), objective="time", bandwidth=1e9, nbytes=1e300)
    with pytest.raises(
        RankoptInputError, match=r"`uplink_bandwidth` must be finite, between 0.001 and 1e\+15 B/s"
    ):
        rankopt.cost(
            lat,
            np.arange(4),
            objective="contention",
            groups=[0, 0, 1, 1],
            uplink_bandwidth=1e-300,
            nbytes=1e6,
        )


def test_complex_is_refused():
    with pytest.raises(RankoptInputError, match=r"`latency` must be real; got dtype complex128"):
        check_matrix(np.ones((3, 3)) + 0j)
    with pytest.raises(RankoptInputError, match=r"imaginary part would be lost"):
        check_matrix([[0, 1 + 2j], [1, 0]])


def test_timedelta_latency_is_converted_to_seconds():
    a = np.array([[0, 250, 1500], [250, 0, 3], [1500, 3, 0]], dtype="timedelta64[us]")
    out = check_matrix(a)
    assert out.dtype == np.float64
    np.testing.assert_allclose(out, a.astype(np.int64) * 1e-6)
    b = np.array([[0, 2], [3, 0]], dtype="timedelta64[m]")
    assert check_matrix(b)[0, 1] == 120.0
    nat = a.copy()
    nat[0, 1] = np.timedelta64("NaT")
    with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] is nan \(1 missing"):
        check_matrix(nat)
    assert check_matrix(nat, nan="symmetric")[0, 1] == pytest.approx(250e-6)
    with pytest.raises(
        RankoptInputError, match=r"at most 1e\+06 s; latency\[0, 1\] is 1.2096e\+06"
    ):
        check_matrix(np.array([[0, 2], [1, 0]], dtype="timedelta64[W]"))


def test_timedelta_bandwidth_is_refused():
    with pytest.raises(
        RankoptInputError, match=r"`bandwidth` must be a rate in B/s; got durations \(dtype"
    ):
        check_matrix(np.ones((3, 3), dtype="timedelta64[s]"), "bandwidth", quantity="bandwidth")


def test_masked_entries_are_missing():
    data = np.array([[0, 1, 9], [2, 0, 3], [4, 5, 0]], dtype=float)
    m = np.ma.masked_array(data, mask=[[0, 0, 1], [0, 0, 0], [0, 0, 0]])
    with pytest.raises(
        RankoptInputError, match=r"`latency` must be finite; latency\[0, 2\] is masked \(1 missing"
    ):
        check_matrix(m)
    out = check_matrix(m, nan="symmetric")
    assert out[0, 2] == 4  # from the reverse direction, not the masked 9
    assert out[1, 2] == 3
    both = np.ma.masked_array(data, mask=[[0, 1, 0], [1, 0, 0], [0, 0, 0]])
    with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] and latency\[1, 0\] are missing"):
        check_matrix(both, nan="symmetric")
    assert check_matrix(both, nan="max")[0, 1] == 9
    # a masked inf or out-of-range value is not a measurement
    big = np.ma.masked_array(np.where(np.eye(3), 0, 1e308), mask=~np.eye(3, dtype=bool))
    big.mask[0, 1] = False
    big.data[0, 1] = 1.0
    with pytest.raises(RankoptInputError, match=r"no measured off-diagonal|missing in both"):
        check_matrix(big, nan="symmetric")
    ints = np.ma.masked_array(np.ones((3, 3), dtype=np.int64), mask=np.eye(3, k=1, dtype=bool))
    assert check_matrix(ints, nan="max")[0, 1] == 1.0
    assert check_matrix(np.ma.masked_array(data))[0, 2] == 9  # nothing masked


@pytest.mark.parametrize(
    "value, match",
    [
        (np.ones((3, 3), dtype=bool), r"got dtype bool instead \(booleans are not measurements"),
        (np.ones((3, 3)).astype(object), r"got dtype object instead \(convert it with numpy"),
        ([[0, None], [1, 0]], r"got dtype object instead"),
        (np.ones((3, 3)).astype(str), r"got dtype <U32 instead \(parse the strings first"),
        (np.ones((3, 3)).astype(bytes), r"got dtype \|S32 instead \(parse the strings first"),
        (
            np.zeros((3, 3), dtype="datetime64[s]"),
            r"got dtype datetime64\[s\] instead \(these are dates",
        ),
    ],
)
def test_non_numeric_dtypes_are_refused(value, match):
    with pytest.raises(RankoptInputError, match=r"`latency` must be a numeric array; " + match):
        check_matrix(value)


def test_sparse_is_refused():
    sparse = pytest.importorskip("scipy.sparse")
    with pytest.raises(RankoptInputError, match=r"`latency` must be a dense array; got a sparse"):
        check_matrix(sparse.csr_matrix(np.ones((3, 3))))


def test_solve_gets_the_same_errors():
    import rankopt

    m = np.where(np.arange(25).reshape(5, 5) % 2, 1e308, 1e-6)
    for method in ("ils", "two_opt", "anneal", "held_karp"):
        with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] is 1e\+308"):
            rankopt.solve(m, method=method, nan="symmetric")
    with pytest.raises(RankoptInputError, match=r"latency\[0, 1\] is 1e\+308"):
        rankopt.solve(np.full((5, 5), 1e308))
    td = np.full((4, 4), 3, dtype="timedelta64[ms]")
    assert rankopt.solve(td, rng=0).baseline_cost == pytest.approx(4 * 3e-3)


@pytest.mark.parametrize(
    "value, match",
    [
        (
            float("nan"),
            r"`objective` must return a finite number; bad\(latency, order\) returned nan",
        ),
        (
            float("inf"),
            r"`objective` must return a finite number; bad\(latency, order\) returned inf",
        ),
        (-np.inf, r"`objective` must return a finite number; bad\(latency, order\) returned -inf"),
        (
            "fast",
            r"`objective` must return a real number; bad\(latency, order\) returned 'fast' \(str\)",
        ),
        (
            None,
            r"`objective` must return a real number; bad\(latency, order\) returned None \(NoneType\)",
        ),
    ],
)
@pytest.mark.parametrize("method", ["auto", "anneal", "brute_force", "greedy_cluster", "swap"])
def test_custom_objective_must_return_a_finite_number(value, match, method):
    import rankopt

    def bad(latency, order):
        return value

    with pytest.raises(RankoptInputError, match=match + r" for order \["):
        rankopt.solve(np.ones((6, 6)), objective=bad, method=method, rng=0, max_iter=200)


def test_custom_objective_non_finite_on_some_orders():
    import rankopt

    def bad(latency, order):
        return float("nan") if order[0] == 2 else float(order[0])

    with pytest.raises(RankoptInputError, match=r"returned nan for order \[2, "):
        rankopt.solve(np.ones((5, 5)), objective=bad, method="brute_force")


def test_jitted_objective_non_finite_is_refused():
    numba = pytest.importorskip("numba")
    import rankopt
    from rankopt.solvers.custom import CustomModel, anneal_custom

    @numba.njit
    def bad(latency, order):
        return np.nan if order[3] == 5 else float(order[0])

    with pytest.raises(RankoptInputError, match=r"`objective` must return a finite number; bad"):
        rankopt.solve(np.ones((9, 9)), objective=bad, method="anneal", rng=0, max_iter=500)

    @numba.njit
    def bad_off_start(latency, order):
        return 1.0 if order[0] == 0 else np.nan

    class _Ctx:
        keep_rank0 = False
        time_limit = None

    # the Numba loop's own check: swaps away from a finite start price nan
    model = CustomModel(np.ones((9, 9)), bad_off_start)
    with pytest.raises(
        RankoptInputError, match=r"nan or inf for an order one swap away from \[0, "
    ):
        anneal_custom(model, _Ctx(), np.random.default_rng(0), np.arange(9), None, 500)
