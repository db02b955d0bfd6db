"""Property-based fuzzing of the file readers and the command line's numeric options.

Every example must end well: a valid result (a finite, non-negative matrix of
the right shape; a permutation; a workload of positive calls) or one of
rankopt's own errors (``RankoptError``, or ``FileNotFoundError``) with a
one-line message -- never another exception, a hang or a silently wrong
value.

The CI profile (``tests/conftest.py``) runs a few examples per test; the
``fuzz`` profile runs thousands::

    HYPOTHESIS_PROFILE=fuzz pytest tests/test_fuzz_files.py

(``RANKOPT_FUZZ_EXAMPLES`` sets the examples per test of that profile; the
default, 3,000 for each of the 8 property tests, is over 20,000 in all).
"""

from __future__ import annotations

import io
import json
import os
import time
import zipfile

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import rankopt
from rankopt.errors import RankoptError

#: Longest an example may take (a hang or runaway work is a failure).
LIMIT_S = 20.0

_FOLDER: list[str] = []


@pytest.fixture(scope="module", autouse=True)
def _folder(tmp_path_factory):
    _FOLDER.append(str(tmp_path_factory.mktemp("fuzz")))
    yield
    _FOLDER.pop()


def _path(name: str) -> str:
    return os.path.join(_FOLDER[-1], name)


def _ends_well(fn, *args, **kw):
    """Call ``fn``; return its result, or None after one of rankopt's own errors."""
    t0 = time.perf_counter()
    try:
        out = fn(*args, **kw)
    except (RankoptError, FileNotFoundError) as exc:
        text = str(exc)
        assert text and "\n" not in text.strip(), f"not one line: {text!r}"
        out = None
    assert time.perf_counter() - t0 < LIMIT_S, f"{fn.__name__} took too long"
    return out


def _valid_matrix(m, name="latency"):
    m = np.asarray(m)
    assert m.dtype == np.float64 and m.ndim == 2 and m.shape[0] == m.shape[1] >= 2, m
    assert np.all(np.isfinite(m)) and np.all(m >= 0) and np.all(np.diag(m) == 0), name


def _valid_network(net):
    lat = net.latency  # a network may hold missing entries (NaN), filled by solve()'s policy
    assert lat.dtype == np.float64 and lat.shape == (net.n, net.n) and net.n >= 2
    assert not np.any(np.isinf(lat)) and not np.any(lat < 0) and np.all(np.diag(lat) == 0)
    n = net.n
    if net.bandwidth is not None:
        off = ~np.eye(n, dtype=bool)
        assert np.all(net.bandwidth[off] > 0)
    for spread in (net.latency_spread, net.bandwidth_spread):
        if spread is not None:
            off = ~np.eye(n, dtype=bool)
            assert np.all(np.isfinite(spread[off])) and np.all(spread[off] >= 0)
    if net.hosts is not None:
        from rankopt._validation import check_host_names

        assert check_host_names(net.hosts, n) == net.hosts


# ------------------------------------------------------------------ strategies
_NUMBERS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True, width=64),
    st.integers(min_value=-(10**30), max_value=10**30),
    st.sampled_from([0, 1e-6, 1e-3, 1.0, 1e9, -1.0, 1e300, 5e-324]),
)
_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_HOSTS = st.one_of(
    st.sampled_from(["h0", "h1", "node-2", "10.0.0.5", "a.b", "h0\n", "h\x000", "h 0", "h_0"]),
    _TEXT,
)
_JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), _NUMBERS.filter(lambda x: x == x), _TEXT),
    lambda inner: st.one_of(st.lists(inner, max_size=5), st.dictionaries(_TEXT, inner, max_size=5)),
    max_leaves=30,
)


_CELL = _NUMBERS.map(lambda x: x if x == x else None)  # NaN is not JSON: null instead


@st.composite
def _matrices(draw, cell=_CELL):
    n = draw(st.integers(0, 5))
    ragged = draw(st.booleans()) and n > 1
    rows = []
    for i in range(n):
        m = n + (draw(st.integers(-1, 1)) if ragged else 0)
        rows.append(
            [0 if (i == j and draw(st.booleans())) else draw(cell) for j in range(max(m, 0))]
        )
    return rows


_DTYPES = st.sampled_from(
    ["<f8", "<f4", "<i8", "|i1", "|u1", "|b1", "<c16", "<M8[s]", "<m8[ms]", "<U4", "|S4"]
)
_MEMBERS = st.sampled_from(
    ["latency", "bandwidth", "latency_spread", "bandwidth_spread", "pair_counts",
     "bandwidth_counts", "latency_samples", "bandwidth_samples", "hosts", "groups", "uplinks",
     "uplinks_in", "timestamps", "seed", "format", "source", "backend", "parameters",
     "provenance", "extra"]
)  # fmt: skip


@st.composite
def _arrays(draw, name):
    kind = draw(st.sampled_from(["good", "good", "random"]))
    n = draw(st.integers(1, 5))
    if kind == "good":
        if name in ("latency", "bandwidth", "latency_spread", "bandwidth_spread"):
            vals = draw(st.lists(_NUMBERS.map(float), min_size=n * n, max_size=n * n))
            return np.array(vals, dtype=float).reshape(n, n)
        if name in ("pair_counts", "bandwidth_counts", "latency_samples", "bandwidth_samples"):
            return np.array(draw(st.lists(st.integers(-3, 50), min_size=n * n, max_size=n * n)))
        if name == "hosts":
            return np.array(draw(st.lists(_HOSTS, min_size=n, max_size=n)))
        if name == "groups":
            k = draw(st.integers(1, 3))
            return np.array(draw(st.lists(st.integers(0, 3), min_size=k * n, max_size=k * n)))
        if name in ("parameters", "provenance"):
            return np.array(json.dumps(draw(_JSON)))
        if name == "format":
            return np.array(draw(st.sampled_from(["rankopt.network/1", "x", ""])))
    dtype = np.dtype(draw(_DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 4), max_size=3)))
    size = int(np.prod(shape)) if shape else 1
    raw = draw(st.binary(min_size=size * dtype.itemsize, max_size=size * dtype.itemsize))
    return np.frombuffer(raw, dtype=dtype).reshape(shape).copy()


@st.composite
def _npz_files(draw):
    names = draw(st.lists(_MEMBERS, unique=True, max_size=10))
    if draw(st.booleans()):
        names = ["latency", "hosts", *[x for x in names if x not in ("latency", "hosts")]]
    arrays = {name: draw(_arrays(name)) for name in names}
    buf = io.BytesIO()
    np.savez(buf, **arrays)
    data = buf.getvalue()
    mangle = draw(st.sampled_from(["none", "none", "truncate", "flip"]))
    if mangle == "truncate" and data:
        data = data[: draw(st.integers(0, len(data) - 1))]
    elif mangle == "flip" and data:
        k = draw(st.integers(0, len(data) - 1))
        data = data[:k] + bytes([data[k] ^ draw(st.integers(1, 255))]) + data[k + 1 :]
    return data


# ---------------------------------------------------------------------- files
@given(_npz_files())
def test_fuzz_npz(data):
    path = _path("f.npz")
    with open(path, "wb") as fh:
        fh.write(data)
    net = _ends_well(rankopt.load_network, path)
    if net is not None:
        _valid_network(net)
    m = _ends_well(rankopt.load_measurement, path)
    if m is not None:
        assert len(m.hosts) == m.n
    lat = _ends_well(rankopt.load_matrix, path)
    if lat is not None:
        _valid_matrix(lat)


@given(st.one_of(_JSON, _matrices(), st.builds(
    lambda rows, labels, unit: {"matrix": rows, "labels": labels, "unit": unit},
    _matrices(), st.one_of(st.none(), st.lists(_TEXT, max_size=5), _JSON),
    st.one_of(st.none(), st.sampled_from(["s", "ms", "us", "x"]), _JSON),
), st.dictionaries(_TEXT, st.one_of(st.dictionaries(_TEXT, _NUMBERS, max_size=5), _JSON),
                   max_size=5)))  # fmt: skip
def test_fuzz_json_matrix(doc):
    path = _path("m.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    lat = _ends_well(rankopt.load_matrix, path)
    if lat is not None:
        _valid_matrix(lat)


@given(st.binary(max_size=200))
def test_fuzz_json_matrix_bytes(data):
    path = _path("b.json")
    with open(path, "wb") as fh:
        fh.write(data)
    lat = _ends_well(rankopt.load_matrix, path)
    if lat is not None:
        _valid_matrix(lat)


_CELLS = st.one_of(
    _NUMBERS.map(repr),
    st.sampled_from(["", "nan", "NA", "-", "1_000", "\u0661", "\u00b2", "1e400", "host", "a b"]),
    _TEXT,
)


@given(
    st.lists(st.lists(_CELLS, max_size=5), max_size=6),
    st.sampled_from([",", ";", "\t", " "]),
    st.booleans(),
)
def test_fuzz_csv(rows, sep, header):
    text = "\n".join(sep.join(r) for r in rows)
    if header and rows:
        text = "src" + sep + "dst" + sep + "latency\n" + text
    path = _path("m.csv")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    lat = _ends_well(rankopt.load_matrix, path)
    if lat is not None:
        _valid_matrix(lat)


@given(st.one_of(
    _JSON,
    st.builds(lambda order, net: {"order": order, "network": net},
              st.one_of(st.permutations(range(4)), _JSON),
              st.one_of(st.none(), _JSON, st.builds(
                  lambda n, hosts: {"n": n, "hosts": hosts},
                  st.one_of(st.integers(-2, 6), _JSON), st.one_of(st.lists(_HOSTS, max_size=6),
                                                                   _JSON)))),
))  # fmt: skip
def test_fuzz_order_files(doc):
    from rankopt.adapters._common import read_order_file

    path = _path("o.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    of = _ends_well(read_order_file, path)
    if of is not None:
        n = len(of.order)
        assert sorted(of.order.tolist()) == list(range(n))
        if of.network is not None and of.network.get("hosts") is not None:
            assert len(of.network["hosts"]) == n


@given(st.one_of(
    _JSON,
    st.lists(st.one_of(
        st.tuples(st.sampled_from(["allreduce", "alltoall", "x"]), _NUMBERS, _NUMBERS),
        st.fixed_dictionaries({"collective": st.sampled_from(["allreduce", "broadcast"]),
                               "nbytes": _NUMBERS, "count": _NUMBERS}),
        _JSON,
    ), max_size=4),
))  # fmt: skip
def test_fuzz_workload_files(doc):
    from rankopt.models.workload import load_workload

    path = _path("w.json")
    with open(path, "w") as fh:
        json.dump(doc, fh)
    calls = _ends_well(load_workload, path)
    for c in calls or ():
        assert c.nbytes > 0 and c.count > 0 and np.isfinite(c.nbytes) and np.isfinite(c.count)
    lat = np.full((4, 4), 1e-5)
    np.fill_diagonal(lat, 0)
    if calls:
        res = _ends_well(rankopt.solve, lat, workload=calls, rng=0, max_iter=50)
        if res is not None:
            assert np.isfinite(res.cost) and np.isfinite(res.speedup) and res.speedup >= 1


# ----------------------------------------------------------- numeric options
_OPTION = st.one_of(
    st.sampled_from(["0", "-1", "nan", "inf", "-inf", "1e-300", "1e300", "1e18", "3", "0.5",
                     "1_0", "", "x", "9" * 40, "1e9"]),
    st.integers(-(10**20), 10**20).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
)  # fmt: skip


@given(_OPTION, _OPTION, _OPTION, _OPTION)
def test_fuzz_verify_and_probe_options(sizes, repeats, budget, timeout):
    from rankopt.adapters._common import parse_options
    from rankopt.adapters.verify_stats import check_timing, parse_sizes

    parsed = _ends_well(parse_sizes, sizes)
    try:
        rep = int(repeats)
    except ValueError:
        rep = None
    try:
        b, t = float(budget), float(timeout)
    except ValueError:
        b, t = 10.0, 60.0
    _ends_well(check_timing, parsed, rep, b, t, None, flags=True)
    for key in ("latency_bytes", "repeats", "warmup", "uplink_flows", "timeout"):
        opts = _ends_well(parse_options, [f"{key}={repeats}"])
        if opts is not None and isinstance(opts.get(key), (int, float)):
            from rankopt.probe._common import check_params

            _ends_well(check_params, **opts)


@given(_OPTION, _OPTION, _OPTION, st.sampled_from(["ring", "chain", "recursive_doubling"]))
def test_fuzz_solve_cli_numbers(nbytes, time_limit, max_iter, algorithm):
    from rankopt.cli import main

    path = _path("c.npz")
    if not os.path.exists(path):
        rankopt.synthetic_cloud(1, 2, 2, rng=0).save(path)
    collective = "broadcast" if algorithm == "chain" else "allreduce"
    argv = ["solve", path, "-q", "--collective", collective, "--algorithm", algorithm,
            "--nbytes", nbytes, "--time-limit", time_limit, "--max-iter", max_iter]  # fmt: skip
    t0 = time.perf_counter()
    try:
        status = main(argv)
    except SystemExit as exc:  # argparse: a usage error
        status = exc.code
    assert status in (0, 1, 2)
    assert time.perf_counter() - t0 < LIMIT_S


def test_fuzz_npz_with_many_members_is_quick():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(20_000):
            zf.writestr(f"a{i}.npy", b"")
    path = _path("many.npz")
    with open(path, "wb") as fh:
        fh.write(buf.getvalue())
    assert _ends_well(rankopt.load_network, path) is None
