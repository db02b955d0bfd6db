import json

import numpy as np
import pytest

from rankopt import RankoptInputError, load_matrix
from rankopt.io import read_matrix

M = np.array([[0.0, 1.0, 2.0], [1.5, 0.0, 3.0], [2.5, 3.5, 0.0]])


def test_npy_units(tmp_path):
    f = tmp_path / "m.npy"
    np.save(f, M)
    assert np.allclose(load_matrix(f), M)
    assert np.allclose(load_matrix(f, unit="ms"), M * 1e-3)
    assert np.allclose(load_matrix(f, unit="us", rtt=True), M * 0.5e-6)


def test_npy_never_unpickles(tmp_path):
    f = tmp_path / "obj.npy"
    np.save(f, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(RankoptInputError, match="not a plain numeric .npy file"):
        load_matrix(f)


def test_csv_with_and_without_labels(tmp_path):
    plain = tmp_path / "plain.csv"
    plain.write_text("\n".join(",".join(str(x) for x in row) for row in M))
    assert np.allclose(load_matrix(plain), M)
    lab = tmp_path / "lab.csv"
    lab.write_text("src,a,b,c\na,,1,2\nb,1.5,,3\nc,2.5,3.5,\n")
    vals, labels, _ = read_matrix(lab)
    assert labels == ["a", "b", "c"]
    assert np.allclose(load_matrix(lab), M)


def test_csv_missing_cell_is_nan(tmp_path):
    f = tmp_path / "gap.csv"
    f.write_text("0,1,\n1,0,3\n2,3,0\n")
    with pytest.raises(RankoptInputError, match=r"latency\[0, 2\] is nan"):
        load_matrix(f)
    assert load_matrix(f, nan="symmetric")[0, 2] == 2.0


def test_csv_errors(tmp_path):
    f = tmp_path / "bad.csv"
    f.write_text("0,1\n1,x\n")
    with pytest.raises(RankoptInputError, match=r"data row 1, column 1: 'x' is not a number"):
        load_matrix(f)
    g = tmp_path / "ragged.csv"
    g.write_text("0,1,2\n1,0\n2,3,0\n")
    with pytest.raises(
        RankoptInputError, match=r"rows have different lengths; data row 1 has 2 cells"
    ):
        load_matrix(g)


def test_json_forms(tmp_path):
    a = tmp_path / "rows.json"
    a.write_text(json.dumps(M.tolist()))
    assert np.allclose(load_matrix(a), M)
    b = tmp_path / "obj.json"
    b.write_text(json.dumps({"matrix": M.tolist(), "unit": "ms", "labels": ["x", "y", "z"]}))
    assert np.allclose(load_matrix(b), M * 1e-3)
    c = tmp_path / "nested.json"
    c.write_text(json.dumps({"x": {"x": 5, "y": 1}, "y": {"x": 2, "y": 5}}))
    assert np.allclose(load_matrix(c), [[0, 1], [2, 0]])
    d = tmp_path / "bad.json"
    d.write_text("{nope")
    with pytest.raises(RankoptInputError, match="is not valid JSON"):
        load_matrix(d)


def test_file_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_matrix(tmp_path / "missing.npy")
    f = tmp_path / "m.txt"
    f.write_text("0")
    with pytest.raises(RankoptInputError, match=r"unknown extension '.txt'; expected one of"):
        load_matrix(f)
    g = tmp_path / "m.npy"
    np.save(g, M)
    with pytest.raises(RankoptInputError, match=r"`unit` must be one of 's', 'ms'.*got 'min'"):
        load_matrix(g, unit="min")


@pytest.mark.parametrize(
    "rel, nan, n",
    [
        ("planetlab490/planetlab490_t1_ms.npy", "raise", 490),
        ("seattle99/seattle99_t1_ms.npy", "max", 99),
        ("azure/azure_rtt_p95_ms.npy", "raise", 54),
        ("azure/azure_rtt_p95_ms.csv", "raise", 54),
        ("aws_cloudping/aws_cloudping_p50_ms.npy", "raise", 21),
        ("aws_cloudping/all_latencies.json", "raise", 21),
        ("aws_gcp_intercloud/aws_gcp_vm_rtt_median_ms.npy", "max", 45),
        ("aws_gcp_intercloud/aws_gcp_vm_rtt_median_dense29_ms.npy", "raise", 29),
        ("ripe_atlas_country/ripe_atlas_country_rtt_avg_ms.npy", "max", 173),
        ("cardano_bench52/cardano_bench52_rtt_size64_mean_ms.npy", "max", 52),
    ],
)
def test_real_matrices_load(shared_data, rel, nan, n):
    m = load_matrix(shared_data / "latency" / rel, unit="ms", rtt=True, nan=nan)
    assert m.shape == (n, n)
    assert np.isfinite(m).all() and (m >= 0).all()
    assert (np.diag(m) == 0).all()
    assert 1e-6 < np.median(m[~np.eye(n, dtype=bool)]) < 10  # seconds


def test_json_and_npy_agree(shared_data):
    d = shared_data / "latency" / "aws_cloudping"
    a = load_matrix(d / "all_latencies.json", unit="ms")
    b = load_matrix(d / "aws_cloudping_p50_ms.npy", unit="ms")
    assert np.allclose(a, b)


def test_matrices_that_need_a_nan_policy(shared_data):
    with pytest.raises(
        RankoptInputError, match=r"`latency` must be finite; latency\[\d+, \d+\] is nan"
    ):
        load_matrix(shared_data / "latency/seattle99/seattle99_t1_ms.npy", unit="ms")


def test_tsplib_reader_reproduces_every_optimal_tour(shared_data):
    from _tsplib import read_opt_tour, read_optima, read_tsplib, tour_length

    optima = read_optima(shared_data / "optima.csv")
    checked = 0
    for tour_file in sorted((shared_data / "tsplib").glob("*.opt.tour")):
        name = tour_file.name.split(".")[0]
        d = read_tsplib(shared_data / "tsplib" / f"{name}.tsp")
        order = read_opt_tour(tour_file)
        assert sorted(order.tolist()) == list(range(d.shape[0]))
        assert tour_length(d, order) == optima[name], name
        checked += 1
    assert checked >= 25
