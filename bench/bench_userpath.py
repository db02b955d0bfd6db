"""The solve part of the user's path at job start: a probed network to an order, default flags.

``python -m rankopt.mpi`` and ``rankopt run`` do this on rank 0 after the probe:
``Network.from_measurement`` (hierarchy and uplinks inferred from bandwidth), then
``solve(network)`` (contention model at the entry point's size, speedup interval from
the spreads). Run::

    python -m pytest bench/bench_userpath.py --benchmark-only

The networks are probed views of racks that differ only in bandwidth, with
noise-only latency (see ``tests/test_network.py::probed``).
"""

import numpy as np
import pytest
from test_network import crossings, probed

import rankopt
from rankopt import Network
from rankopt.network import DDP_BUCKET_BYTES

CASES = {
    "64: 8 racks x 8": (8,) * 8,
    "64: 4 racks x 16": (16,) * 4,
    "128: 16 racks x 8": (8,) * 16,
}


@pytest.mark.parametrize("racks", list(CASES.values()), ids=list(CASES))
def test_probe_to_order(benchmark, racks):
    m, rack = probed(racks, 0)

    def user_path():
        return rankopt.solve(Network.from_measurement(m), nbytes=DDP_BUCKET_BYTES)

    res = benchmark.pedantic(user_path, rounds=3, iterations=1)
    benchmark.extra_info.update(
        n=int(rack.size),
        speedup=float(res.speedup),
        interval=[float(x) for x in res.speedup_interval],
        crossings=crossings(rack, np.asarray(res.order)),
        racks=len(racks),
        method=res.method,
    )
    assert crossings(rack, np.asarray(res.order)) == len(racks)
