import numpy as np
import pytest

from rankopt import RankoptInputError, synthetic_cloud
from rankopt.network.cloud import example_path, load_cloud


def test_shape_levels_and_seed():
    c = synthetic_cloud(2, 3, 4, 2, rng=11)
    assert c.n == 48 and c.latency.shape == (48, 48) and c.bandwidth.shape == (48, 48)
    host, rack, pod = c.groups
    lat = c.latency
    same_host = host[:, None] == host[None, :]
    cross_pod = pod[:, None] != pod[None, :]
    off = ~np.eye(48, dtype=bool)
    assert lat[same_host & off].max() < lat[cross_pod].min()
    again = synthetic_cloud(2, 3, 4, 2, rng=c.seed)
    assert np.array_equal(again.latency, c.latency)


def test_unshuffled_is_contiguous():
    c = synthetic_cloud(2, 2, 2, shuffle=False, rng=0)
    assert c.groups[1].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]


def test_save_load_roundtrip(tmp_path):
    c = synthetic_cloud(1, 2, 3, rng=1)
    c.save(tmp_path / "c.npz")
    d = load_cloud(tmp_path / "c.npz")
    assert np.array_equal(c.latency, d.latency) and d.hosts == c.hosts
    assert [g.tolist() for g in d.groups] == [g.tolist() for g in c.groups]


def test_example_ships():
    c = load_cloud(example_path())
    assert c.n == 48


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n_pods": 0}, r"`n_pods` must be positive and finite; got 0"),
        ({"noise": 1.5}, r"`noise` must be in \[0, 1\); got 1.5"),
        ({"latency": (1, 2)}, r"must give 4 values"),
    ],
)
def test_errors(kwargs, match):
    with pytest.raises(RankoptInputError, match=match):
        synthetic_cloud(**kwargs)
