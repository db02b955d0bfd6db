"""The probe protocol on an in-process transport: threads that exchange NumPy buffers.

Fast checks of the engine's logic (schedule, counts, consensus, failure reports,
settings check) without launching processes; the real engines are exercised in
test_probe_mpi.py and test_probe_torch.py.
"""

import threading
import time
from collections import defaultdict, deque

import numpy as np
import pytest

from rankopt import RankoptInputError
from rankopt.probe import ProbeTimeoutError
from rankopt.probe._common import ProbeParams
from rankopt.probe._engine import (
    RECHECK_PASSES,
    SHARING_STEPS,
    TAG_SIZE,
    recheck_pairs,
    run_probe,
)


class _Hub:
    """Shared state of one simulated job of ``n`` processes."""

    def __init__(self, n):
        self.n = n
        self.lock = threading.Lock()
        self.mail = defaultdict(deque)  # (src, dst, tag) -> messages
        self.collectives = defaultdict(dict)  # sequence number -> {rank: contribution}
        self.reports = {}


class _Done:
    def test(self):
        return True


class _Recv:
    def __init__(self, hub, key, buf):
        self.hub, self.key, self.buf = hub, key, buf

    def test(self):
        with self.hub.lock:
            box = self.hub.mail[self.key]
            if not box:
                return False
            self.buf[...] = box.popleft()
        return True


class _Collective:
    def __init__(self, hub, seq, finish):
        self.hub, self.seq, self.finish = hub, seq, finish

    def test(self):
        with self.hub.lock:
            parts = self.hub.collectives[self.seq]
            if len(parts) < self.hub.n:
                return False
        self.finish(parts)
        return True


class ThreadTransport:
    def __init__(self, hub, rank):
        self.hub, self.rank, self.size = hub, rank, hub.n
        self.seq = 0

    def isend(self, buf, peer, tag):
        with self.hub.lock:
            self.hub.mail[(self.rank, peer, tag)].append(buf.copy())
        return _Done()

    def irecv(self, buf, peer, tag):
        return _Recv(self.hub, (peer, self.rank, tag), buf)

    def _collective(self, value, finish):
        self.seq += 1
        with self.hub.lock:
            self.hub.collectives[self.seq][self.rank] = value.copy()
        return _Collective(self.hub, self.seq, finish)

    def allreduce_max(self, send, recv):
        def finish(parts):
            recv[...] = np.max([parts[q] for q in range(self.size)], axis=0)

        return self._collective(send, finish)

    def allgather(self, send, recv):
        def finish(parts):
            for q in range(self.size):
                recv[q] = parts[q]

        return self._collective(send, finish)

    def wait(self, handles, deadline, *, busy):
        pending = list(handles)
        while True:
            pending = [h for h in pending if not h.test()]
            if not pending:
                return True
            if time.perf_counter() >= deadline:
                return False
            time.sleep(1e-4)

    def exchange_reports(self, key, report, deadline):
        with self.hub.lock:
            self.hub.reports[(key, self.rank)] = report
        while True:
            with self.hub.lock:
                found = [self.hub.reports.get((key, q)) for q in range(self.size)]
            if all(f is not None for f in found) or time.perf_counter() >= deadline:
                return found
            time.sleep(1e-3)


def run_job(n, params, *, stall=None, callbacks=None):
    """Run the engine on ``n`` threads; per rank: the Measurement or the exception."""
    hub = _Hub(n)
    results = {}

    def body(rank):
        p = params[rank] if isinstance(params, list) else params
        if stall is not None and stall[0] == rank:
            return  # this process never takes part
        try:
            cb = callbacks[rank] if callbacks else None
            results[rank] = run_probe(
                ThreadTransport(hub, rank), p, cb, backend="threads", hostname=f"h{rank % 2}"
            )
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    return results


FAST = ProbeParams(repeats=3, bandwidth_repeats=2, bandwidth_bytes=4096, timeout=20.0)


@pytest.mark.parametrize("n", [2, 5, 6])
def test_engine_measures_every_pair_once(n):
    results = run_job(n, FAST)
    ms = [results[r] for r in range(n)]
    assert all(not isinstance(m, Exception) for m in ms), ms
    m = ms[0]
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_array_equal(m.pair_counts, off.astype(np.int64))
    np.testing.assert_array_equal(m.bandwidth_counts, off.astype(np.int64))
    assert np.all(m.latency[off] > 0) and np.all(np.diag(m.latency) == 0)
    assert np.all(m.bandwidth[off] > 0) and np.all(np.isfinite(m.bandwidth))
    assert m.hosts == tuple(f"h{r % 2}" for r in range(n))
    for other in ms[1:]:
        np.testing.assert_array_equal(other.latency, m.latency)
        assert other.started_at == m.started_at and other.finished_at == m.finished_at
        assert other.parameters.get("recheck") == m.parameters.get("recheck")


def test_engine_reports_progress_per_round_and_slot():
    n = 4
    seen = {r: [] for r in range(n)}
    callbacks = {r: seen[r].append for r in range(n)}
    results = run_job(n, FAST, callbacks=callbacks)
    m = results[0]
    for r in range(n):
        phases = [(p.phase, p.step, p.steps) for p in seen[r]]
        rounds = m.parameters["latency_rounds"]
        slots = m.parameters["bandwidth_slots"]
        again = len(m.parameters.get("recheck", [])) // RECHECK_PASSES  # groups the rates show
        shared = bool(m.parameters.get("sharing"))  # two groups of two hosts shown
        # the sampled schedule's stages, each numbered from 1 (one stage of all the slots
        # for the all-pairs one)
        stages = [k for _, k in m.parameters.get("bandwidth_stages", [["all", slots]])]
        assert sum(stages) == slots
        assert phases == [("latency", i + 1, rounds) for i in range(rounds)] + [
            ("bandwidth", i + 1, k) for k in stages for i in range(k)
        ] + [("recheck", i + 1, again) for _ in range(RECHECK_PASSES if again else 0)
             for i in range(again)] + [("sharing", i + 1, 2 * SHARING_STEPS + 1) for i in range((2 * SHARING_STEPS + 1) * shared)]  # fmt: skip
        assert all(b.elapsed >= a.elapsed for a, b in zip(seen[r], seen[r][1:], strict=False))


def test_engine_without_bandwidth():
    m = run_job(3, ProbeParams(repeats=2, bandwidth=False, timeout=20.0))[0]
    assert m.bandwidth is None and m.bandwidth_counts is None
    assert m.parameters["bandwidth_slots"] == 0


def test_engine_rejects_different_settings_on_every_rank():
    params = [FAST, FAST, ProbeParams(repeats=4, bandwidth_bytes=4096, timeout=20.0)]
    results = run_job(3, params)
    for r in range(3):
        assert isinstance(results[r], RankoptInputError)
        assert "probe settings differ between processes: rank 2" in str(results[r])


def test_engine_absent_rank_raises_on_all_others():
    n = 5
    results = run_job(n, ProbeParams(repeats=2, timeout=0.5), stall=(3,))
    assert sorted(results) == [0, 1, 2, 4]
    for exc in results.values():
        assert isinstance(exc, ProbeTimeoutError)
        assert exc.phase == "start" and 3 in exc.ranks
        assert "rank 3" in str(exc) and "did not report" in str(exc)


def test_engine_late_partner_gets_the_same_diagnosis_everywhere(monkeypatch):
    # rank 2 stops answering in latency round 2, where it meets rank 0; rank 0 itself starts
    # that round 0.4 timeout late (a starved process): every live rank must blame rank 2
    # alone. With deadlines from each process's own round start, ranks 1 and 3 closed their
    # report window before rank 0 reported and blamed rank 0 too.
    timeout = 1.0
    monkeypatch.setenv("RANKOPT_PROBE_TEST_STALL", "2:2:3")
    monkeypatch.setenv("RANKOPT_PROBE_TEST_SKEW", f"0:2:{0.4 * timeout}")
    results = run_job(4, ProbeParams(repeats=2, bandwidth=False, timeout=timeout))
    live = [results[r] for r in (0, 1, 3)]
    assert all(isinstance(exc, ProbeTimeoutError) for exc in live), results
    messages = {str(exc) for exc in live}
    assert len(messages) == 1, messages
    assert "rank 2 did not answer rank 0 (pair (0, 2))" in messages.pop()
    assert all(exc.ranks == [2] and exc.pairs == [(0, 2)] and exc.step == 2 for exc in live)


def test_engine_linear_mode_fills_the_matrix_and_records_the_groups():
    from dataclasses import replace

    from rankopt.network import Network

    n = 6
    results = run_job(n, replace(FAST, bandwidth_mode="linear"))
    ms = [results[r] for r in range(n)]
    assert all(not isinstance(m, Exception) for m in ms), ms
    m = ms[0]
    off = ~np.eye(n, dtype=bool)
    assert np.all(m.bandwidth[off] > 0) and np.all(np.diag(m.bandwidth) == 0)
    # hosts h0 (even ranks) and h1 (odd): one pair across, one inside each host, measured
    assert m.bandwidth_counts[0, 1] == m.bandwidth_counts[1, 0] == 1
    assert m.bandwidth_counts[0, 2] == m.bandwidth_counts[1, 3] == 1
    assert 0 < m.bandwidth_counts.sum() < off.sum()
    # filled: the hosts' rate, the better direction of the pair measured between them
    assert m.bandwidth[2, 5] == m.bandwidth[5, 2] == max(m.bandwidth[0, 1], m.bandwidth[1, 0])
    assert m.parameters["groups"] == [[0, 1, 0, 1, 0, 1]]
    assert m.parameters["bandwidth_mode"] == "linear"
    assert m.parameters["bandwidth_slots"] == sum(s for _, s in m.parameters["bandwidth_stages"])
    assert len(m.parameters["uplink_capacity"][0]) == 2
    for other in ms[1:]:
        np.testing.assert_array_equal(other.bandwidth, m.bandwidth)
        assert other.parameters == m.parameters
    assert Network.from_measurement(m).level_sizes()[0] == [3, 3]


def test_recheck_pairs_one_per_two_sibling_groups():
    # two pods of two racks: racks pair up inside their pod, pods pair once
    rack = np.repeat([0, 1, 2, 3], 2)
    pod = rack // 2
    bw = np.where(
        rack[:, None] == rack[None, :], 100.0, np.where(pod[:, None] == pod[None, :], 30.0, 5.0)
    )
    assert recheck_pairs(bw, [f"h{i}" for i in range(8)]) == [(0, 2), (4, 6), (0, 4)]
    # no hierarchy above the hosts: nothing to recheck
    assert recheck_pairs(np.full((4, 4), 50.0), ["a", "b", "c", "d"]) == []


# -- the linear latency mode over a transport with modelled latency ------------------------


class _DelayedRecv(_Recv):
    """A receive that completes once the message's modelled delivery time has come."""

    def test(self):
        with self.hub.lock:
            box = self.hub.mail[self.key]
            if not box or box[0][0] > time.perf_counter():
                return False
            self.buf[...] = box.popleft()[1]
        return True


class DelayTransport(ThreadTransport):
    """Messages from ``a`` to ``b`` arrive ``hub.latency[a, b]`` seconds after they are sent."""

    def isend(self, buf, peer, tag):
        at = time.perf_counter() + self.hub.latency[self.rank, peer]
        with self.hub.lock:
            self.hub.mail[(self.rank, peer, tag)].append((at, buf.copy()))
        return _Done()

    def irecv(self, buf, peer, tag):
        return _DelayedRecv(self.hub, (peer, self.rank, tag), buf)


def run_modelled(latency, hosts, params, *, absent=(), transport=None, hub=None, run=run_probe):
    """The engine on one thread per process, over :class:`DelayTransport` (or
    ``transport``, on ``hub`` when given); ``run`` takes :func:`run_probe`'s arguments."""
    n = len(hosts)
    hub = _Hub(n) if hub is None else hub
    hub.latency = latency
    transport = DelayTransport if transport is None else transport
    results = {}

    def body(rank):
        if rank in absent:
            return
        try:
            results[rank] = run(
                transport(hub, rank), params, None, backend="threads", hostname=hosts[rank]
            )
        except Exception as exc:
            results[rank] = exc

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


def _zones(n_hosts=12, per_host=1, slow=()):
    """Two zones of hosts: 1.5 ms inside a zone, 6 ms across, 0.3 ms inside a host."""
    n = n_hosts * per_host
    host = np.arange(n) // per_host
    zone = host >= n_hosts // 2
    lat = np.where(zone[:, None] == zone[None, :], 1.5e-3, 6e-3)
    lat[host[:, None] == host[None, :]] = 0.3e-3
    for h in slow:  # a congested VM: its links to other hosts twice slower
        on = host == h
        lat[on[:, None] & ~on[None, :]] *= 2.5
        lat[~on[:, None] & on[None, :]] *= 2.5
    np.fill_diagonal(lat, 0.0)
    return lat, [f"h{h}" for h in host], zone


LINEAR = ProbeParams(repeats=3, warmup=1, bandwidth=False, timeout=20.0, latency_mode="linear")


def test_engine_linear_latency_fills_the_blocks_and_finds_the_zones():
    lat, hosts, zone = _zones(12, per_host=2)
    results = run_modelled(lat, hosts, LINEAR)
    ms = [results[r] for r in range(24)]
    assert all(not isinstance(m, Exception) for m in ms), ms
    m = ms[0]
    for other in ms[1:]:  # the same schedule and the same fill everywhere
        np.testing.assert_array_equal(other.latency, m.latency)
        assert other.parameters == m.parameters
    p = m.parameters
    assert p["latency_mode_run"] == "linear" and p["latency_mode"] == "linear"
    off = ~np.eye(24, dtype=bool)
    # far fewer pairs than all of them, yet every entry filled
    assert 0 < m.pair_counts.sum() < 0.6 * off.sum()
    assert np.all(m.latency[off] > 0) and np.all(np.isfinite(m.latency))
    assert p["latency_rounds"] == sum(s for _, s, _ in p["latency_stages"])
    assert p["latency_pairs"] == sum(k for _, _, k in p["latency_stages"])
    # the zones, found from the pivots' pairs
    zones = np.array(p["latency_groups"][-1])
    assert len(set(zip(zones.tolist(), zone.tolist(), strict=True))) == 2
    # the filled entries match their block within the threads' noise
    filled = off & (m.pair_counts == 0)
    ratio = m.latency[filled] / lat[filled]
    assert filled.sum() > 100
    assert 0.7 < np.median(ratio) < 1.6
    assert np.quantile(ratio, 0.9) < 2.5
    assert p["congested_hosts"] == []


def test_engine_linear_latency_reports_a_congested_vm():
    lat, hosts, _ = _zones(12, per_host=1, slow=(4,))
    results = run_modelled(lat, hosts, LINEAR)
    m = results[0]
    assert not isinstance(m, Exception), m
    congested = m.parameters["congested_hosts"]
    assert [name for name, _ in congested] == ["h4"], congested
    assert congested[0][1] > 1.5
    # its filled links carry its factor: slower than its zone's other hosts'
    others = [h for h in range(6) if h != 4]
    assert np.median(m.latency[4, others]) > 1.5 * np.median(m.latency[np.ix_(others, others)])


def test_engine_linear_latency_dead_peer_raises_on_every_live_rank(monkeypatch):
    # rank 3 stops answering at the start of the second stage: every live rank
    # raises within the stage's timeout, naming rank 3 (not the ranks it held up)
    lat, hosts, _ = _zones(8, per_host=1)
    monkeypatch.setenv("RANKOPT_PROBE_TEST_STALL", "3:2:4")
    params = ProbeParams(repeats=2, bandwidth=False, timeout=1.0, latency_mode="linear")
    results = run_modelled(lat, hosts, params)
    live = [results[r] for r in range(8) if r != 3]
    assert all(isinstance(exc, ProbeTimeoutError) for exc in live), results
    for exc in live:
        assert exc.phase == "latency" and exc.step == 2
        assert 3 in exc.ranks
        assert "rank 3" in str(exc)
    assert len({str(exc) for exc in live}) == 1


def test_engine_linear_latency_progress_per_stage():
    n = 8
    lat, hosts, _ = _zones(n, per_host=1)
    hub = _Hub(n)
    hub.latency = lat
    seen = {r: [] for r in range(n)}
    results = {}

    def body(rank):
        results[rank] = run_probe(
            DelayTransport(hub, rank), LINEAR, seen[rank].append, backend="t", hostname=hosts[rank]
        )

    threads = [threading.Thread(target=body, args=(r,), daemon=True) for r in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    stages = results[0].parameters["latency_stages"]
    for r in range(n):
        assert [(p.phase, p.step, p.steps) for p in seen[r]] == [
            ("latency", i + 1, 0) for i in range(len(stages))
        ]
        assert all(r in pair for p in seen[r] for pair in p.pairs)


# -- sized bandwidth transfers over a transport with modelled rates ------------------------


class RateTransport(DelayTransport):
    """Messages also take ``size / hub.rate[a, b]`` seconds, one after another on a link;
    every announced size (0 ends a run of transfers) is recorded in ``hub.sizes[(a, b)]``."""

    def isend(self, buf, peer, tag):
        now = time.perf_counter()
        with self.hub.lock:
            link = (self.rank, peer)
            start = max(now, self.hub.busy.get(link, 0.0))
            self.hub.busy[link] = start + buf.nbytes / self.hub.rate[self.rank, peer]
            at = self.hub.busy[link] + self.hub.latency[self.rank, peer]
            self.hub.mail[(self.rank, peer, tag)].append((at, buf.copy()))
            if tag == TAG_SIZE:
                self.hub.sizes[link].append(int(buf[0]))
        return _Done()


RATED = ProbeParams(
    repeats=3, bandwidth_repeats=3, bandwidth_bytes=128 << 10, warmup=1, timeout=30.0
)


def _rated_job(rate, params=RATED, rtol=0.1):
    """The probe over :class:`RateTransport` at ``rate``: rank 0's measurement, the hub.

    Every rate is read back within ``rtol``."""
    n = len(rate)
    hub = _Hub(n)
    hub.rate, hub.busy, hub.sizes = rate, {}, defaultdict(list)
    hosts = [f"h{r}" for r in range(n)]
    results = run_modelled(np.full((n, n), 1e-4), hosts, params, transport=RateTransport, hub=hub)
    m = results[0]
    assert not isinstance(m, Exception), m
    off = ~np.eye(n, dtype=bool)
    np.testing.assert_allclose(m.bandwidth[off], rate[off], rtol=rtol)
    return m, hub


def test_a_direction_stops_after_two_timed_transfers_that_agree():
    n = 3
    # rank 0 sends to both others at 2 MB/s; ranks 1 and 2 each at two rates
    rate = np.array([[1, 2e6, 2e6], [2e6, 1, 3e6], [2e6, 3e6, 1]], dtype=float)
    params = RATED
    _, hub = _rated_job(rate)
    assert len(hub.sizes) == n * (n - 1)  # both directions of every pair
    stopped_early, single = 0, set()
    for (a, b), sizes in hub.sizes.items():
        # one run of announced transfers per direction and phase (the bandwidth phase,
        # then the recheck where the rates show groups), each ended by a 0
        assert a != b and sizes[-1] == 0
        ends = [i for i, x in enumerate(sizes) if x == 0]
        for k, (start, end) in enumerate(zip([-1, *ends[:-1]], ends, strict=True)):
            announced = sizes[start + 1 : end]
            assert set(announced) == {params.bandwidth_bytes}
            timed = len(announced) - params.warmup
            assert (1 if k == 0 else 2) <= timed <= params.bandwidth_repeats, (a, b, sizes)
            stopped_early += timed == 2
            if timed == 1:
                single.add((a, b))
    # a link whose rate does not change gives two samples that agree: no third is taken
    assert stopped_early >= 1, dict(hub.sizes)
    # in the bandwidth phase a rate its sender already read from two that agreed needs
    # one transfer: rank 0's second link, and no link of a sender whose rates differ
    assert len(single) == 1 and single <= {(0, 1), (0, 2)}, (single, dict(hub.sizes))


def test_the_sampled_schedule_measures_the_racks_and_a_sample_of_each_block():
    # three racks of three hosts whose racks show only in bandwidth: the stars find them,
    # every pair inside a rack and 8 of each block of 9 are measured, the rest filled
    rack = np.arange(9) // 3
    # 8 ms a transfer inside a rack: nine polling threads' overhead (~0.4 ms a transfer)
    # stays inside 10% on an idle machine (at 40 MB/s it took 10-19%), but on two busy
    # cores a transfer's timing can slip by a scheduler slice (12-23% seen on 3 of 72
    # rates). What this test checks is the schedule, and 4x between racks and blocks
    # shows through 30%; the 10% read-back is the 3-process tests' to check.
    rate = np.where(rack[:, None] == rack[None, :], 16e6, 4e6)
    m, hub = _rated_job(rate, rtol=0.3)
    p = m.parameters
    assert p["bandwidth_mode_run"] == "sampled"
    groups = np.array(p["sampled_groups"])
    assert ((groups[:, None] == groups) == (rack[:, None] == rack)).all()
    stages = [name for name, _ in p["bandwidth_stages"]]
    assert stages[0] == "stars" and stages[-1] == "blocks", stages
    assert p["bandwidth_slots"] == sum(k for _, k in p["bandwidth_stages"])
    ran = {tuple(sorted(k)) for k in hub.sizes}  # pairs that sent announced transfers
    inside = {(a, b) for a in range(9) for b in range(a + 1, 9) if rack[a] == rack[b]}
    assert inside <= ran
    assert len(ran) == len(inside) + 3 * 8  # the recheck runs pairs already measured
    assert p["filled_pairs"] == 3
    counts = m.bandwidth_counts
    assert int(((counts == 0) & ~np.eye(9, dtype=bool)).sum()) == 2 * 3  # filled, both ways
    # the racks' pairs measured in one stage beside the blocks' ones run side by side
    assert p["bandwidth_slots"] < len(ran)
    # the sharing test across two racks: each step followed by one of its pairs alone
    pairs = [(int(row[0]), int(row[1])) for row in p["sharing"]]
    assert len(pairs) >= 2 and len({int(rack[a]) for a, _ in pairs}) == 1
    assert [(int(a), int(b)) for a, b, _ in p["sharing_alone"]] == [
        pairs[j % len(pairs)] for j in range(SHARING_STEPS)
    ]
    for a, b, got in p["sharing_alone"]:  # a flow alone at its link's rate (busy cores: 2x)
        assert 0.5 * rate[int(a), int(b)] <= got <= 2.0 * rate[int(a), int(b)]


def test_the_drift_check_warms_up_small_and_reads_the_stored_rates_back(monkeypatch, tmp_path):
    # a probe kept, then a launch on the same hosts: its drift check sends announced
    # transfers as the probe does, the warm-up of at most WARMUP_BYTES, then
    # CHECK_REPEATS timed ones of the check's size, and finds nothing moved
    import rankopt.probe._engine as engine
    from rankopt.adapters.cache import CHECK_REPEATS, ProbeCache, probe_with_cache

    monkeypatch.setattr(engine, "WARMUP_BYTES", 16 << 10)
    n = 4
    rack = np.arange(n) // 2
    rate = np.where(rack[:, None] == rack[None, :], 40e6, 10e6)
    hub = _Hub(n)
    hub.rate, hub.busy, hub.sizes = rate, {}, defaultdict(list)

    def with_cache(tr, params, callback, **kw):
        return probe_with_cache(tr, params, ProbeCache(directory=tmp_path), callback, **kw)

    def launch():
        out = run_modelled(
            np.full((n, n), 1e-4), [f"h{r}" for r in range(n)], RATED,
            transport=RateTransport, hub=hub, run=with_cache,
        )  # fmt: skip
        assert len(out) == n and not any(isinstance(m, Exception) for m in out.values()), out
        return out[0].parameters["cache"]

    assert launch()["status"] == "probed"
    for kept in (hub.sizes, hub.collectives, hub.mail, hub.reports, hub.busy):
        kept.clear()  # a new job: its collectives count from the first again
    info = launch()
    assert info["status"] == "hit" and not any(p.get("moved") for p in info["pairs"]), info
    assert hub.sizes
    for (a, b), sizes in hub.sizes.items():
        ends = [i for i, x in enumerate(sizes) if x == 0]
        for start, end in zip([-1, *ends[:-1]], ends, strict=True):
            announced = sizes[start + 1 : end]
            warm, timed = announced[: RATED.warmup], announced[RATED.warmup :]
            assert len(timed) == CHECK_REPEATS and len(set(timed)) == 1, (a, b, sizes)
            assert timed[0] > 16 << 10 and all(x == 16 << 10 for x in warm), (a, b, sizes)


def test_the_warm_up_is_small_and_never_a_sample(monkeypatch):
    import rankopt.probe._engine as engine

    monkeypatch.setattr(engine, "WARMUP_BYTES", 32 << 10)
    rate = np.array([[1, 2e6, 4e6], [2e6, 1, 3e6], [4e6, 3e6, 1]], dtype=float)
    params = RATED
    # read back within 10%: a 32 KiB warm-up timed as 128 KiB would read 4x fast
    _, hub = _rated_job(rate)
    for (a, b), sizes in hub.sizes.items():
        ends = [i for i, x in enumerate(sizes) if x == 0]
        for start, end in zip([-1, *ends[:-1]], ends, strict=True):
            announced = sizes[start + 1 : end]
            assert announced[: params.warmup] == [32 << 10] * params.warmup, (a, b, sizes)
            assert set(announced[params.warmup :]) == {params.bandwidth_bytes}, (a, b, sizes)
    # the plan prices the same bytes: a warm-up of 32 KiB and the timed transfers
    from rankopt.probe import plan

    monkeypatch.setattr(plan, "WARMUP_BYTES", 32 << 10)
    seconds, nbytes, messages = plan._slot_cost(
        [(0, 1)], params, lambda a, b: rate[a, b], lambda a, b: np.zeros(len(a))
    )
    sent = (32 << 10) + 3 * (128 << 10)
    assert nbytes == 2 * sent and messages == 2 * 4
    assert seconds == pytest.approx(2 * sent / 2e6)
