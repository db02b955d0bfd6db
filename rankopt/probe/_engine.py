"""The probe protocol, written once for every backend.

A backend supplies a :class:`Transport` (non-blocking point-to-point messages,
a non-blocking max-allreduce and allgather, and waits with a deadline); the
engine runs the phases:

1. **start** -- allgather of host names, start time and a fingerprint of the
   settings (different settings on different processes are an error);
2. **latency** -- all-pairs mode: the round-robin rounds; in each, both
   processes of a pair start ``warmup + repeats`` ping-pongs in turn. Linear
   mode (:mod:`rankopt.probe.linear_latency`): a few adaptive *stages* of
   pairs, each process running its own pairs in slot order with no consensus
   between them, one consensus and a gather of the measured pairs per stage;
   an initiator whose ping-pongs take more than :data:`PAIR_BUDGET` times
   ``repeats`` of its best round trip stops early (each ping says whether it
   is the last, so both sides agree);
3. **bandwidth** -- the slots of :func:`~rankopt.probe.schedule.bandwidth_slots`;
   in each, both processes of a pair send ``warmup`` messages of at most
   :data:`WARMUP_BYTES` and ``bandwidth_repeats`` large ones in turn, each
   announced by its size and answered by a small acknowledgement (a direction
   ends after two timed messages whose rates agree within
   :data:`~rankopt.probe._common.RATE_AGREE`, or after the first when its
   rate agrees as closely with one its sender read earlier in the phase);
4. **gather** -- allgather of every process's rows of the matrices;
5. **recheck** (all-pairs bandwidth only) -- one pair of every two sibling
   groups that the gathered bandwidth shows, alone in its slot, measured
   again in :data:`RECHECK_PASSES` passes (:func:`recheck_pairs`). A transfer
   alone cannot be slowed by the probe's own side-by-side transfers, so a
   recheck far from what its groups measured before is another tenant whose
   traffic comes and goes (``parameters["recheck"]``,
   :func:`rankopt.network.core.measured_variability`).
6. **sharing** -- a few transfers from distinct hosts of one group to a
   sibling group, side by side, one message each in every one of
   :data:`SHARING_STEPS` steps (and one before them), each followed by one of
   them alone (:func:`~rankopt.probe.sharing.sharing_slots`), against a flow alone:
   how an uplink splits between the transfers that wait for each other
   (:mod:`rankopt.probe.sharing`, ``parameters["straggle"]``); then, when
   one way out of a group is much slower than its siblings', the same test
   across it: how much of another tenant's load there yields to more flows
   (``parameters["elastic"]``).

Every round and slot ends with a consensus: an allreduce of a failure flag with
a deadline. When it fails or times out, all processes still alive exchange
failure reports over a channel that does not depend on the failed links (MPI:
point to point; Gloo, which closes all links of a process after one timeout:
the rendezvous store) and raise :class:`ProbeTimeoutError` naming the round and
the pairs or processes that did not answer. Deadlines are measured
from the start of the round: the pair exchange has ``0.6 * timeout``, the
consensus until ``0.8 * timeout`` and the failure exchange until
``0.95 * timeout``, so every live process raises within ``timeout`` of the
round's start.

The start of a round is *common* to all processes: every consensus (and the
allgathers of the start and gather steps) also carries the wall-clock time
at which each process entered it, and the next round starts, on every
process, at the latest of those times (converted to the local clock, never
later than the moment the process itself saw the consensus complete, nor more
than half a timeout before it). A process that starts a round late -- starved
of CPU on a loaded machine -- thus keeps the same deadlines as the others,
and all of them exchange their failure reports in the same window and raise
the same diagnosis. Host clocks must agree to well within the timeout (NTP
does); a clock that is ahead only makes the deadlines of the others later.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import numpy as np
from numpy.typing import NDArray

from rankopt.probe._common import (
    RATE_AGREE,
    ProbeParams,
    ProbeProgress,
    ProbeTimeoutError,
    TestHooks,
    median_mad,
    resolve_bandwidth_mode,
    resolve_latency_mode,
    transfer_seconds,
)
from rankopt.probe._topology import infer_link_levels
from rankopt.probe.linear import LinearPlanner
from rankopt.probe.linear_latency import LatencyPlanner
from rankopt.probe.measurement import Measurement
from rankopt.probe.schedule import SampledPlanner, bandwidth_slots, round_robin

__all__ = ["Transport", "run_probe", "pair_budget_cut", "PAIR_BUDGET", "MIN_PAIR_SAMPLES"]

logger = logging.getLogger("rankopt.probe")

TAG_LAT, TAG_BW, TAG_ACK = 0x7A10, 0x7A11, 0x7A12
TAG_PAIR = 0x7A14  # ping-pongs of the linear latency stages (each ping says if it is the last)
TAG_SIZE = 0x7A15  # the size of the next bandwidth transfer (0: the last was sent)
#: An initiator stops once its timed round trips add up to this many times
#: ``repeats`` round trips at its best -- a pair slowed by a heavy tail costs a
#: bounded time -- keeping at least :data:`MIN_PAIR_SAMPLES` samples.
PAIR_BUDGET = 2.0
MIN_PAIR_SAMPLES = 3
#: Slots of a linear latency stage per ``timeout``: a stage of S slots may take
#: ``timeout * (1 + S // ASYNC_SLOTS_PER_TIMEOUT)`` before a peer is declared dead.
ASYNC_SLOTS_PER_TIMEOUT = 32
#: Bytes of an announced bandwidth warm-up transfer (at most the timed size): enough to
#: bring a TCP connection out of slow start and drain a link's small token bucket
#: (on the testbed a first 1 MiB transfer ran 10% fast, the second not).
WARMUP_BYTES = 256 << 10
PAIR_SHARE, CONSENSUS_SHARE, FAILURE_SHARE = 0.6, 0.8, 0.95
MAX_SKEW_SHARE = 0.5  # the common start of a round is at most this much before the local one
HOST_BYTES = 256
_Rows = tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64], float]
_UNIT = {
    "latency": "round",
    "bandwidth": "slot",
    "recheck": "slot",
    "start": "step",
    "cache": "step",
    "gather": "step",
}


class Transport(Protocol):
    """What a backend provides to the engine. Buffers are 1-D NumPy arrays."""

    rank: int
    size: int

    def isend(self, buf: NDArray[Any], peer: int, tag: int) -> Any: ...

    def irecv(self, buf: NDArray[Any], peer: int, tag: int) -> Any: ...

    def allreduce_max(self, send: NDArray[np.int64], recv: NDArray[np.int64]) -> Any: ...

    def allgather(self, send: NDArray[Any], recv: NDArray[Any]) -> Any: ...

    def wait(self, handles: Sequence[Any], deadline: float, *, busy: bool) -> bool:
        """Wait for all handles until ``deadline`` (perf_counter); False on timeout."""
        ...

    def exchange_reports(self, key: str, report: int, deadline: float) -> list[int | None]:
        """Tell every other process ``report`` and collect theirs until ``deadline``.

        Returns one entry per process: its report, or ``None`` if none arrived.
        Used only after a failure, so it must not rely on the failed links.
        """
        ...


class _Probe:
    def __init__(
        self,
        tr: Transport,
        params: ProbeParams,
        callback: Callable[[ProbeProgress], Any] | None,
        backend: str,
        hostname: str,
        topology: Any = None,
    ) -> None:
        self.tr, self.p, self.callback, self.backend = tr, params, callback, backend
        self.topology = topology
        self.n, self.me = tr.size, tr.rank
        self.hostname = hostname
        self.hooks = TestHooks.from_env(self.me)
        self.t_begin = time.perf_counter()
        self.epoch = self.t_begin  # common start of the next step, perf_counter clock
        self.small_out = np.zeros(params.latency_bytes, dtype=np.uint8)
        self.small_in = np.zeros(params.latency_bytes, dtype=np.uint8)
        self.flag_out = np.zeros(params.latency_bytes, dtype=np.uint8)
        self.flag_in = np.zeros(params.latency_bytes, dtype=np.uint8)
        self.size_out = np.zeros(1, dtype=np.int64)
        self.size_in = np.zeros(1, dtype=np.int64)
        self._cut = 0
        self._last_finish = 0.0
        #: (phase, steps, latest finish) of every phase run: the same on every process
        self.timings: list[tuple[str, int, float]] = []

    # -- control plane -----------------------------------------------------------------
    def _set_epoch(self, latest_entry: float) -> None:
        """Start the next step at ``latest_entry`` (wall clock, the latest process's entry).

        Converted to this process's ``perf_counter`` clock and kept between half a
        timeout before now and now, so that a process that saw the step complete late
        computes the same deadlines as the others.
        """
        now = time.perf_counter()
        entry = latest_entry - (time.time() - now)
        self.epoch = min(now, max(entry, now - MAX_SKEW_SHARE * self.p.timeout))

    def _consensus(
        self,
        phase: str,
        step: int,
        steps: int,
        t0: float,
        failed_peer: int,
        pairs: Sequence,
        span: float = 1.0,
    ) -> None:
        # failure flag and entry time (microseconds): the max of both comes back
        flag = np.array([0 if failed_peer < 0 else 1, int(time.time() * 1e6)], dtype=np.int64)
        out = np.zeros(2, dtype=np.int64)
        deadline = t0 + CONSENSUS_SHARE * self.p.timeout * span
        try:
            ok = self.tr.wait([self.tr.allreduce_max(flag, out)], deadline, busy=False)
        except RuntimeError as exc:  # a backend that already gave up on the peer
            logger.debug("consensus failed on rank %d: %s", self.me, exc)
            ok = False
        if ok and out[0] == 0:
            self._set_epoch(out[1] / 1e6)
            return
        self._fail(phase, step, steps, t0, failed_peer, pairs, span)

    def _fail(
        self,
        phase: str,
        step: int,
        steps: int,
        t0: float,
        failed_peer: int,
        pairs: Sequence,
        span: float = 1.0,
    ) -> None:
        """Exchange failure reports with everyone still alive, then raise on all of them.

        ``span`` stretches the deadlines of a linear latency stage. There, a
        process waits on partners that may themselves wait on a dead peer: a
        report naming a peer that reported a failure of its own is dropped
        (that peer was alive, held up further down the chain).
        """
        n = self.n
        deadline = max(t0 + FAILURE_SHARE * self.p.timeout * span, time.perf_counter() + 0.05)
        got = self.tr.exchange_reports(f"{phase}/{step}", failed_peer, deadline)
        got[self.me] = failed_peer
        partner = {a: b for a, b in pairs} | {b: a for a, b in pairs}
        failed = sorted({(q, peer) for q, peer in enumerate(got) if peer is not None and peer >= 0})
        if span > 1.0 or steps == 0:  # a stage: blame the end of each chain
            own = [-1 if r is None else r for r in got]
            blocked = [(q, p) for q, p in failed if p is not None and own[p] < 0]
            failed = blocked or failed
        silent = [q for q in range(n) if got[q] is None]
        unit = _UNIT[phase]
        parts = [
            f"rank {peer} did not answer rank {q} (pair ({min(q, peer)}, {max(q, peer)}))"
            for q, peer in failed
        ]
        named = {peer for _, peer in failed}
        for q in silent:
            if q in named:
                continue
            if q in partner:
                parts.append(f"rank {q} (paired with {partner[q]}) did not report")
            elif phase in ("latency", "bandwidth", "recheck"):
                parts.append(f"rank {q} (no pair this {unit}) did not report")
            else:
                parts.append(f"rank {q} did not report")
        if not parts:
            parts.append("the consensus did not complete")
        of = f" of {steps}" if steps else ""
        message = (
            f"probe timed out in {phase} {unit} {step + 1}{of} "
            f"(timeout {self.p.timeout:g} s): " + "; ".join(parts) + "."
        )
        failed_pairs = {(min(q, p), max(q, p)) for q, p in failed}
        failed_pairs |= {(min(q, partner[q]), max(q, partner[q])) for q in silent if q in partner}
        raise ProbeTimeoutError(
            message,
            phase=phase,
            step=step + 1,
            pairs=sorted(failed_pairs),
            ranks=sorted(named | set(silent)),
        )

    def _collective(self, start: Callable[[], Any], phase: str) -> None:
        """Start a collective and wait for it with the step's deadline, or fail the step."""
        t0 = self.epoch
        deadline = t0 + CONSENSUS_SHARE * self.p.timeout
        try:
            ok = self.tr.wait([start()], deadline, busy=False)
        except RuntimeError:
            ok = False
        if not ok:
            self._fail(phase, 0, 1, t0, -1, ())

    def _allgather(self, send: NDArray[Any], phase: str) -> NDArray[Any]:
        """Allgather ``send`` with the step's deadline, from the common start of the step."""
        recv = np.zeros((self.n, send.size), dtype=send.dtype)
        self._collective(lambda: self.tr.allgather(send, recv), phase)
        return recv

    def _allreduce_max(self, send: NDArray[np.int64], phase: str) -> NDArray[np.int64]:
        """Element-wise max of every process's ``send``, with the step's deadline."""
        recv = np.zeros_like(send)
        self._collective(lambda: self.tr.allreduce_max(send, recv), phase)
        return recv

    def _progress(self, phase: str, step: int, steps: int, pairs: Sequence) -> None:
        logger.debug("rank %d finished %s %d/%d", self.me, phase, step + 1, steps)
        if self.callback is not None:
            self.callback(
                ProbeProgress(
                    phase, step + 1, steps, tuple(pairs), time.perf_counter() - self.t_begin
                )
            )

    # -- data plane --------------------------------------------------------------------
    def _initiate(
        self,
        peer: int,
        out: NDArray,
        back: NDArray,
        tags: tuple[int, int],
        count: int,
        deadline: float,
        warmup: int | None = None,
    ) -> NDArray[np.float64] | None:
        """Send ``out`` and wait for ``back``, ``warmup + count`` times; timed samples."""
        tr = self.tr
        warmup = self.p.warmup if warmup is None else warmup
        delay = self.hooks.delay_to(peer)
        samples = np.empty(count)
        for i in range(warmup + count):
            try:
                rreq = tr.irecv(back, peer, tags[1])
                t = time.perf_counter()
                if delay:
                    time.sleep(delay)
                sreq = tr.isend(out, peer, tags[0])
                ok = tr.wait([sreq, rreq], deadline, busy=True)
            except RuntimeError as exc:  # the backend gave up on the link
                logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
                ok = False
            if not ok:
                return None
            if i >= warmup:
                samples[i - warmup] = time.perf_counter() - t
        return samples

    def _respond(
        self,
        peer: int,
        inbox: NDArray,
        reply: NDArray,
        tags: tuple[int, int],
        count: int,
        deadline: float,
        warmup: int | None = None,
    ) -> bool:
        tr = self.tr
        delay = self.hooks.delay_to(peer)
        try:
            for _ in range((self.p.warmup if warmup is None else warmup) + count):
                if not tr.wait([tr.irecv(inbox, peer, tags[0])], deadline, busy=True):
                    return False
                if delay:
                    time.sleep(delay)
                if not tr.wait([tr.isend(reply, peer, tags[1])], deadline, busy=True):
                    return False
        except RuntimeError as exc:  # the backend gave up on the link
            logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
            return False
        return True

    def _send_announced(
        self,
        peer: int,
        out: NDArray,
        count: int,
        deadline: float,
        warmup: int,
        ack_latency: float,
        known: NDArray[np.float64] | None = None,
    ) -> NDArray[np.float64] | None:
        """Bandwidth transfers of ``out`` to ``peer``, each announced by its size.

        ``warmup`` untimed transfers of up to :data:`WARMUP_BYTES` (they bring the
        connection and any token bucket on the path up to its steady rate; a
        full-size one cost a third of the all-pairs probe), then up to
        ``count`` timed ones of ``out``; the
        direction ends after two timed transfers whose rates agree within
        :data:`~rankopt.probe._common.RATE_AGREE` (``ack_latency``, the
        acknowledgement's one-way latency, is taken off each). With ``known``
        (rates, bytes/s, that this process read to other peers earlier in the
        phase) it already ends after the first
        timed transfer when that one's rate agrees as closely with one of them:
        a link at a rate the job's links were already seen to run at needs no
        second look, while one that reads apart from all of them gets it. A
        size of 0 tells the peer the last was sent. Returns the timed round
        trips; ``None`` when the peer did not answer by ``deadline``.
        """
        tr, head, back = self.tr, self.size_out, self.small_in
        nbytes = int(out.size)
        delay = self.hooks.delay_to(peer)
        elapsed = np.empty(count)
        used = 0
        try:
            small = out[: min(nbytes, WARMUP_BYTES)]
            for i in range(warmup + count):
                send = small if i < warmup else out
                head[0] = send.size
                hreq = tr.isend(head, peer, TAG_SIZE)
                rreq = tr.irecv(back, peer, TAG_ACK)
                t = time.perf_counter()
                if delay:
                    time.sleep(delay)
                sreq = tr.isend(send, peer, TAG_BW)
                if not tr.wait([hreq, sreq, rreq], deadline, busy=True):
                    return None
                took = time.perf_counter() - t
                if i < warmup:
                    continue
                elapsed[used] = took
                used += 1
                if used == 1 and count > 1 and known is not None and known.size:
                    r = nbytes / float(transfer_seconds(took, ack_latency))
                    if bool(np.any(np.abs(known - r) <= RATE_AGREE * np.maximum(known, r))):
                        break
                if used == 2 and count > 2:
                    a, b = transfer_seconds(elapsed[:2], ack_latency)
                    if abs(a - b) <= RATE_AGREE * max(a, b):
                        break
            head[0] = 0
            if not tr.wait([tr.isend(head, peer, TAG_SIZE)], deadline, busy=True):
                return None
        except RuntimeError as exc:  # the backend gave up on the link
            logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
            return None
        return elapsed[:used]

    def _receive_announced(self, peer: int, inbox: NDArray, deadline: float, most: int) -> bool:
        """Answer ``peer``'s :meth:`_send_announced` transfers until it announces the last."""
        tr, head = self.tr, self.size_in
        delay = self.hooks.delay_to(peer)
        try:
            for _ in range(most + 1):
                if not tr.wait([tr.irecv(head, peer, TAG_SIZE)], deadline, busy=True):
                    return False
                nbytes = int(head[0])
                if nbytes == 0:
                    return True
                if not 0 < nbytes <= inbox.size:  # a peer with other settings: caught at start
                    logger.debug("rank %d: peer %d announced %d bytes", self.me, peer, nbytes)
                    return False
                if not tr.wait([tr.irecv(inbox[:nbytes], peer, TAG_BW)], deadline, busy=True):
                    return False
                if delay:
                    time.sleep(delay)
                if not tr.wait([tr.isend(self.small_out, peer, TAG_ACK)], deadline, busy=True):
                    return False
        except RuntimeError as exc:  # the backend gave up on the link
            logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
            return False
        return False  # more transfers than the settings allow

    def _warmup(self, warmup: int | None) -> int:
        return self.p.warmup if warmup is None else warmup

    def _ping_pair(self, peer: int, deadline: float) -> tuple[NDArray[np.float64], bool] | None:
        """Initiate ``warmup + repeats`` ping-pongs, or fewer (:data:`PAIR_BUDGET`).

        Returns the timed round trips and whether they were cut short; ``None``
        when the peer did not answer by ``deadline``.
        """
        tr, warmup, repeats = self.tr, self.p.warmup, self.p.repeats
        out, back = self.flag_out, self.small_in
        delay = self.hooks.delay_to(peer)
        samples = np.empty(repeats)
        used, total, best = 0, 0.0, np.inf
        count = warmup + repeats
        for i in range(count):
            last = i == count - 1 or (
                used + 1 >= MIN_PAIR_SAMPLES and used > 0 and total >= PAIR_BUDGET * repeats * best
            )
            out[0] = 1 if last else 0
            try:
                rreq = tr.irecv(back, peer, TAG_PAIR)
                t = time.perf_counter()
                if delay:
                    time.sleep(delay)
                sreq = tr.isend(out, peer, TAG_PAIR)
                ok = tr.wait([sreq, rreq], deadline, busy=True)
            except RuntimeError as exc:  # the backend gave up on the link
                logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
                ok = False
            if not ok:
                return None
            if i >= warmup:
                rtt = time.perf_counter() - t
                samples[used] = rtt
                used += 1
                total += rtt
                best = min(best, rtt)
            if last:
                break
        return samples[:used], used < repeats

    def _answer_pair(self, peer: int, deadline: float) -> bool:
        """Answer ``peer``'s ping-pongs until the one it marks as the last."""
        tr, inbox = self.tr, self.flag_in
        delay = self.hooks.delay_to(peer)
        try:
            while True:
                if not tr.wait([tr.irecv(inbox, peer, TAG_PAIR)], deadline, busy=True):
                    return False
                if delay:
                    time.sleep(delay)
                if not tr.wait([tr.isend(self.small_out, peer, TAG_PAIR)], deadline, busy=True):
                    return False
                if inbox[0] == 1:
                    return True
        except RuntimeError as exc:  # the backend gave up on the link
            logger.debug("rank %d lost peer %d: %s", self.me, peer, exc)
            return False

    def _async_stage(
        self, index: int, a: NDArray[np.int64], b: NDArray[np.int64], slots: int
    ) -> NDArray[np.float64]:
        """Run one linear latency stage: this process's pairs in order, then gather them.

        ``(a[k], b[k])`` are the stage's pairs in slot order. Returns their
        values, shape (len(a), 4): latency ``a -> b``, ``b -> a`` and their
        spreads (``nan`` where unmeasured), the same on every process.
        """
        n, me = self.n, self.me
        if self.hooks.skew_round == index + 1:
            time.sleep(self.hooks.skew_seconds)  # a late start: the deadlines stay common
        t0 = self.epoch
        if self.hooks.stall_round == index + 1:
            self.hooks.stall()
        span = 1.0 + slots // ASYNC_SLOTS_PER_TIMEOUT
        deadline = t0 + PAIR_SHARE * self.p.timeout * span
        mine = np.flatnonzero((a == me) | (b == me))
        width = int(np.bincount(np.concatenate([a, b]), minlength=n).max(initial=0))
        row = np.full((width, 4), np.nan)  # value, spread, samples, cut short
        failed = -1
        for j, k in enumerate(mine.tolist()):
            peer = int(b[k]) if a[k] == me else int(a[k])
            for first in sorted((me, peer)):
                if first == me:
                    got = self._ping_pair(peer, deadline)
                    if got is None:
                        failed = peer
                        break
                    samples, cut = got
                    row[j, :2] = median_mad(samples / 2.0)
                    row[j, 2:] = len(samples), float(cut)
                elif not self._answer_pair(peer, deadline):
                    failed = peer
                    break
            if failed >= 0:
                break
        mine_pairs = [(int(a[k]), int(b[k])) for k in mine.tolist()]
        self._consensus("latency", index, 0, t0, failed, [], span)
        self._progress("latency", index, 0, mine_pairs)
        gathered = self._allgather(np.concatenate([row.ravel(), [time.time()]]), "gather")
        self._last_finish = float(gathered[:, -1].max())
        rows = gathered[:, :-1].reshape(n, width, 4)
        # the position of every pair in each of its processes' lists
        ends = np.concatenate([a, b])
        idx = np.concatenate([np.arange(len(a))] * 2)
        order = np.lexsort((idx, ends))
        start = np.r_[0, np.cumsum(np.bincount(ends, minlength=n))[:-1]]
        pos = np.empty(2 * len(a), dtype=np.int64)
        pos[order] = np.arange(2 * len(a)) - start[ends[order]]
        pa, pb = pos[: len(a)], pos[len(a) :]
        values = np.column_stack([rows[a, pa, 0], rows[b, pb, 0], rows[a, pa, 1], rows[b, pb, 1]])
        self._cut += int(np.nansum(rows[:, :, 3]))
        return values

    def _linear_latency(
        self, hosts: Sequence[str]
    ) -> tuple[NDArray, NDArray, NDArray, float, LatencyPlanner, dict[str, Any]]:
        """The stages of :class:`~rankopt.probe.linear_latency.LatencyPlanner`, each gathered."""
        planner = LatencyPlanner(hosts)
        self._cut = 0
        self._last_finish = time.time()
        steps = 0
        index = 0
        while (slots := planner.next_stage()) is not None:
            a, b = planner.stage_pairs
            planner.record(self._async_stage(index, a, b, len(slots)))
            steps += len(slots)
            index += 1
        self._set_epoch(self._last_finish)
        self.timings.append(("latency", steps, self._last_finish))
        lat, spread, counts, info = planner.result()
        info["latency_pairs_cut"] = self._cut
        return lat, spread, counts, self._last_finish, planner, info

    # -- phases --------------------------------------------------------------------------
    def _fingerprint(self) -> int:
        """The settings' fingerprint, and the topology's when one is given."""
        fp = self.p.fingerprint()
        if self.topology is not None:
            import zlib

            fp = zlib.crc32(self.topology.fingerprint().encode(), fp)
        return fp

    def _start(self) -> tuple[tuple[str, ...], float]:
        row = np.zeros(16 + HOST_BYTES, dtype=np.uint8)
        row[:8] = np.array([self._fingerprint()], dtype=np.int64).view(np.uint8)
        row[8:16] = np.array([time.time()], dtype=np.float64).view(np.uint8)
        name = self.hostname.encode()[:HOST_BYTES]
        row[16 : 16 + len(name)] = np.frombuffer(name, dtype=np.uint8)
        table = self._allgather(row, "start")
        prints = table[:, :8].copy().view(np.int64)[:, 0]
        if np.any(prints != prints[0]):
            from rankopt._validation import RankoptInputError

            bad = int(np.nonzero(prints != prints[0])[0][0])
            raise RankoptInputError(
                f"probe settings differ between processes: rank {bad} was called with "
                "other arguments than rank 0."
            )
        hosts = tuple(bytes(r[16:]).rstrip(b"\0").decode(errors="replace") for r in table)
        entered = table[:, 8:16].copy().view(np.float64)[:, 0]
        self._set_epoch(float(entered.max()))
        return hosts, float(entered[0])

    def _phase(
        self,
        phase: str,
        steps: Sequence[Sequence[tuple[int, int]]],
        out: NDArray,
        inbox: NDArray,
        tags: tuple[int, int],
        count: int,
        summarise: Callable[[NDArray[np.float64], int], tuple[float, float]],
        warmup: int | None = None,
        per_step: list[NDArray[np.float64]] | None = None,
        ack_latency: NDArray[np.float64] | None = None,
        match_known: bool = False,
        known: NDArray[np.float64] | None = None,
    ) -> _Rows:
        """Run the pairs of every step (both sides in turn), then gather every row.

        The initiator sends ``out`` and times the round trip to the small answer;
        ``summarise(samples, peer)`` turns its samples into (value, spread). Returns
        the (n, n) value, spread and count matrices and the latest finish time.
        ``warmup`` overrides the settings' untimed exchanges; with ``per_step``,
        the (steps, n, n) values of every step (0 where a pair did not run) are
        appended to it. With ``ack_latency`` (one-way latency from each process to
        this one) the pairs exchange announced transfers (:meth:`_send_announced`:
        a direction ends early when two samples agree, and with ``match_known``
        after one that agrees with a rate this process read earlier in the phase:
        in this call, or ``known``, from its earlier stages).
        """
        n, me = self.n, self.me
        row = np.zeros((3, n))  # value, spread, count
        each = np.zeros((len(steps) if per_step is not None else 0, n))
        for s, pairs in enumerate(steps):
            if phase == "latency" and self.hooks.skew_round == s + 1:
                time.sleep(self.hooks.skew_seconds)  # a late start: the deadlines stay common
            t0 = self.epoch
            if phase == "latency" and self.hooks.stall_round == s + 1:
                self.hooks.stall()
            peer = next((b if a == me else a for a, b in pairs if me in (a, b)), -1)
            failed = -1
            deadline = t0 + PAIR_SHARE * self.p.timeout
            for first in sorted((me, peer)) if peer >= 0 else ():
                if first == me:
                    if ack_latency is not None:
                        seen = None
                        if match_known:
                            seen = row[0, row[2] > 0]
                            if known is not None and known.size:
                                seen = np.concatenate([known, seen])
                        samples = self._send_announced(
                            peer,
                            out,
                            count,
                            deadline,
                            self._warmup(warmup),
                            ack_latency[peer],
                            seen,
                        )
                    else:
                        samples = self._initiate(
                            peer, out, self.small_in, tags, count, deadline, warmup
                        )
                    if samples is None:
                        failed = peer
                        break
                    row[0, peer], row[1, peer] = summarise(samples, peer)
                    row[2, peer] += 1
                    if per_step is not None:
                        each[s, peer] = row[0, peer]
                elif ack_latency is not None:
                    most = self._warmup(warmup) + count
                    if not self._receive_announced(peer, inbox, deadline, most):
                        failed = peer
                        break
                elif not self._respond(peer, inbox, self.small_out, tags, count, deadline, warmup):
                    failed = peer
                    break
            self._consensus(phase, s, len(steps), t0, failed, pairs)
            self._progress(phase, s, len(steps), pairs)
        gathered = self._allgather(
            np.concatenate([row.ravel(), each.ravel(), [time.time()]]), "gather"
        )
        mats = gathered[:, : 3 * n].reshape(n, 3, n)
        if per_step is not None:
            per_step.append(gathered[:, 3 * n : -1].reshape(n, len(steps), n).transpose(1, 0, 2))
        finished = float(gathered[:, -1].max())
        self._set_epoch(finished)
        self.timings.append((phase, len(steps), finished))
        return mats[:, 0], mats[:, 1], mats[:, 2], finished

    def _latency(self, rounds: Sequence[Sequence[tuple[int, int]]]) -> _Rows:
        def one_way(rtt: NDArray[np.float64], peer: int) -> tuple[float, float]:
            return median_mad(rtt / 2.0)

        tags = (TAG_LAT, TAG_LAT)
        return self._phase(
            "latency", rounds, self.small_out, self.small_in, tags, self.p.repeats, one_way
        )

    def _bandwidth(
        self,
        latency: NDArray,
        slots: Sequence[Sequence[tuple[int, int]]],
        phase: str = "bandwidth",
        *,
        count: int | None = None,
        warmup: int | None = None,
        per_step: list[NDArray[np.float64]] | None = None,
        known: NDArray[np.float64] | None = None,
    ) -> _Rows:
        """The rates of every slot's pairs; ``count`` (default: the bandwidth
        repeats), ``warmup`` and ``per_step`` as :meth:`_phase` takes them.

        A pair's directions end early where two timed transfers agree
        (:meth:`_send_announced`), unless ``per_step`` asks for the lockstep
        steps of the sharing test, which run every step. ``known``: rates this
        process read in earlier stages of the phase.
        """
        nbytes = self.p.bandwidth_bytes
        me = self.me
        announced = per_step is None

        def rate(elapsed: NDArray[np.float64], peer: int) -> tuple[float, float]:
            return median_mad(nbytes / transfer_seconds(elapsed, latency[peer, me]))

        out = np.ones(nbytes, dtype=np.uint8)
        inbox = np.zeros(nbytes, dtype=np.uint8)
        tags = (TAG_BW, TAG_ACK)
        if count is None:
            count = self.p.bandwidth_repeats
        return self._phase(
            phase,
            slots,
            out,
            inbox,
            tags,
            count,
            rate,
            warmup=warmup,
            per_step=per_step,
            ack_latency=np.ascontiguousarray(latency[:, me]) if announced else None,
            # the recheck looks again on purpose: every transfer of it is timed in full
            match_known=announced and phase != "recheck",
            known=known,
        )

    def _linear_bandwidth(
        self,
        lat: NDArray,
        hosts: Sequence[str],
        levels: Sequence[NDArray[np.int64]],
        plan_lat: NDArray | None = None,
        *,
        given: Sequence[NDArray[np.int64]] | None = None,
    ) -> tuple[NDArray, NDArray, NDArray, float, dict[str, Any]]:
        """The stages of :class:`~rankopt.probe.linear.LinearPlanner`, each gathered.

        The planner works from ``plan_lat`` (host-level, from the linear latency
        phase, whose groups are then the discovery domains) when given, else
        from ``lat``; transfers are timed against ``lat``.
        """
        planner = LinearPlanner(
            lat if plan_lat is None else plan_lat,
            hosts,
            levels,
            uplink_flows=self.p.uplink_flows,
            domains=None if plan_lat is None else levels,
            given=given,
        )
        finished = time.time()
        while (slots := planner.next_stage()) is not None:
            bw, spread, _, finished = self._bandwidth(lat, slots)
            planner.record(
                {
                    (a, b): (bw[a, b], bw[b, a], spread[a, b], spread[b, a])
                    for slot in slots
                    for a, b in slot
                }
            )
        rate, rate_spread, counts, found = planner.result()
        return rate, rate_spread, counts, finished, found

    def _sampled_bandwidth(
        self, lat: NDArray, hosts: Sequence[str], levels: Sequence[NDArray[np.int64]]
    ) -> tuple[NDArray, NDArray, NDArray, float, dict[str, Any]]:
        """The stages of :class:`~rankopt.probe.schedule.SampledPlanner`, each gathered."""
        planner = SampledPlanner(hosts, levels=levels, concurrency=self.p.bw_concurrency)
        finished = time.time()
        while (slots := planner.next_stage()) is not None:
            bw, spread, counts, finished = self._bandwidth(
                lat, slots, known=planner.known_rates(self.me)
            )
            planner.record(bw, spread, counts)
        rate, rate_spread, counts, found = planner.result()
        return rate, rate_spread, counts, finished, found

    def _recheck(
        self, lat: NDArray, bw: NDArray, hosts: Sequence[str], levels: Sequence[NDArray[np.int64]]
    ) -> list[list[float]]:
        """Every recheck pair alone, :data:`RECHECK_PASSES` times: ``[a, b, r_ab, r_ba]`` rows."""
        pairs = recheck_pairs(bw, hosts, levels)
        rows: list[list[float]] = []
        for _ in range(RECHECK_PASSES if pairs else 0):
            again, _, _, _ = self._bandwidth(lat, [[p] for p in pairs], "recheck")
            rows.extend(
                [float(a), float(b), float(again[a, b]), float(again[b, a])] for a, b in pairs
            )
        return rows

    def _sharing(
        self,
        lat: NDArray,
        bw: NDArray,
        hosts: Sequence[str],
        groups: Sequence[NDArray[np.int64]],
        recheck: Sequence[Sequence[float]] = (),
    ) -> dict[str, Any]:
        """The sharing test (:mod:`rankopt.probe.sharing`): ``straggle`` and its rows.

        ``groups`` are the linear phase's, or the all-pairs phase's as the
        recheck found them (:func:`bandwidth_levels`). The test is
        :data:`SHARING_STEPS` lockstep steps, as a collective's: every pair
        sends one message at the step's common start, and the step ends with
        the slowest (one more step first, untimed in effect, brings the
        connections up to speed); after each step one of its pairs runs
        alone, so that load that came while the test ran is read as such
        (``refs`` of :func:`~rankopt.probe.sharing.straggle_exponent`).
        Returns ``{"sharing": [[a, b, rate a -> b per step...], ...],
        "sharing_alone": [[a, b, rate a -> b] per step], "straggle": s,
        "straggle_range": [lo, hi]}`` (the range from the test's quartile
        steps, :func:`~rankopt.probe.sharing.straggle_span`; no ``straggle``
        when the flows showed no shared limit, and the range then
        :data:`~rankopt._validation.UNREAD_STRAGGLE_RANGE`),
        or ``{}`` when no two groups can hold the test. When one way between two groups is much slower than the others
        (:func:`~rankopt.probe.sharing.loaded_pairs`) the test runs across it
        too: ``"sharing_loaded"`` rows and ``"elastic"``, how much of the load
        there yielded (:func:`~rankopt.probe.sharing.elastic_share`).
        """
        from rankopt._validation import UNREAD_STRAGGLE_RANGE
        from rankopt.probe.sharing import (
            elastic_share,
            flow_groups,
            loaded_pairs,
            sharing_pairs,
            sharing_slots,
            straggle_exponent,
            straggle_span,
        )

        levels = [np.asarray(lv, dtype=np.int64) for lv in groups]
        alone = np.array(bw, dtype=np.float64)
        for a, b, r_ab, r_ba in recheck:  # pairs alone across two groups
            alone[int(a), int(b)] = max(alone[int(a), int(b)], r_ab)
            alone[int(b), int(a)] = max(alone[int(b), int(a)], r_ba)
        pairs = sharing_pairs(levels, rates=alone)  # across the least loaded uplinks
        if not pairs:
            return {}
        kept: list[NDArray[np.float64]] = []
        slots = sharing_slots(pairs, SHARING_STEPS)
        self._bandwidth(lat, slots, "sharing", count=1, warmup=0, per_step=kept)
        # the first step brings the connections up to speed; each step is followed by
        # one of its pairs alone, its reference in time
        steps, singles = kept[0][1::2], kept[0][2::2]
        solo = [slot[0] for slot in slots[2::2]]
        refs = [float(singles[j, a, b]) for j, (a, b) in enumerate(solo)]
        out: dict[str, Any] = {
            "sharing": [[float(a), float(b), *map(float, steps[:, a, b])] for a, b in pairs],
            "sharing_alone": [
                [float(a), float(b), r] for (a, b), r in zip(solo, refs, strict=True)
            ],
        }
        ends = flow_groups(levels, pairs)
        s = straggle_exponent(steps, alone, pairs, ends, refs)
        if s is not None:
            out["straggle"] = s
            span = straggle_span(steps, alone, pairs, ends, refs)
            if span is not None and span[1] > span[0]:
                out["straggle_range"] = list(span)
        else:  # the test ran and read no limit: priced as an even split, drawn over a range
            out["straggle_range"] = list(UNREAD_STRAGGLE_RANGE)
        # again across the most loaded way out of a group: does its load yield?
        loaded, rate, quiet = loaded_pairs(levels, alone)
        if loaded:
            kept = []
            self._bandwidth(
                lat, [loaded] * (SHARING_STEPS + 1), "sharing", count=1, warmup=0, per_step=kept
            )
            steps = kept[0][1:]
            out["sharing_loaded"] = [
                [float(a), float(b), *map(float, steps[:, a, b])] for a, b in loaded
            ]
            e = elastic_share(steps, loaded, rate, quiet, 1.0 if s is None else s)
            if e is not None:
                out["elastic"] = e
        return out

    def run(self) -> Measurement:
        hosts, started = self._start()
        lat_mode = resolve_latency_mode(self.p.latency_mode, self.n)
        found: dict[str, Any] = {}
        if lat_mode == "linear":
            lat, lat_spread, counts, finished, planner, found = self._linear_latency(hosts)
            levels = planner.levels()
            host_lat = planner.host_lat
            latency_rounds = sum(planner.slots_per_stage)
        else:
            rounds = round_robin(self.n)
            lat, lat_spread, counts, finished = self._latency(rounds)
            levels = infer_link_levels(lat, hosts)
            host_lat = None
            latency_rounds = len(rounds)
        bw = bw_spread = bw_counts = bw_levels = None
        slots: list[list[tuple[int, int]]] = []
        # the provider's groups: the same on every process (same hosts, same labels); a
        # topology that does not name the job's hosts leaves the probe to discover them
        given = None
        topology_error = None
        if self.topology is not None:
            from rankopt._validation import RankoptInputError

            try:
                given = self.topology.groups(hosts)
            except RankoptInputError as exc:
                topology_error = str(exc)
        mode = resolve_bandwidth_mode(
            self.p.bandwidth_mode, len(set(hosts)), groups_given=given is not None
        )
        if self.p.bandwidth and mode == "linear":
            bw, bw_spread, bw_counts, finished, bw_found = self._linear_bandwidth(
                lat, hosts, levels, host_lat, given=given
            )
            found |= bw_found
        elif self.p.bandwidth:
            if mode == "sampled" and given is None:
                bw, bw_spread, bw_counts, finished, bw_found = self._sampled_bandwidth(
                    lat, hosts, levels
                )
                found |= bw_found
            else:
                slots = bandwidth_slots(
                    lat, hosts, concurrency=self.p.bw_concurrency, levels=given or levels
                )
                bw, bw_spread, bw_counts, finished = self._bandwidth(lat, slots)
            # once: the recheck's and sharing's groups
            bw_levels = given or bandwidth_levels(bw, hosts)
            recheck = self._recheck(lat, bw, hosts, bw_levels)
            if recheck:
                found["recheck"] = recheck
                finished = self.timings[-1][2]
        if bw is not None:
            share_groups = found.get("groups")
            if share_groups is None:
                share_groups = bw_levels if bw_levels is not None else bandwidth_levels(bw, hosts)
            sharing = self._sharing(lat, bw, hosts, share_groups, found.get("recheck", ()))
            if sharing:
                found |= sharing
                finished = self.timings[-1][2]
        parameters = self.p.as_dict() | {
            "n": self.n,
            "latency_rounds": latency_rounds,
            "latency_mode_run": lat_mode,
            "bandwidth_slots": len(slots),
            "link_levels": len(levels),
            "bandwidth_mode_run": mode if self.p.bandwidth else "none",
            "phase_seconds": _phase_seconds(started, self.timings),
        }
        if found:
            parameters |= found
        if self.topology is not None:
            parameters["topology"] = {
                "source": self.topology.source,
                "levels": list(self.topology.levels),
            }
            if topology_error is not None:
                parameters["topology"]["error"] = topology_error
        if "bandwidth_stages" in found:
            parameters["bandwidth_slots"] = sum(s for _, s in found["bandwidth_stages"])
        return Measurement(
            latency=lat,
            bandwidth=bw,
            hosts=hosts,
            latency_spread=lat_spread,
            bandwidth_spread=bw_spread,
            pair_counts=counts.astype(np.int64),
            bandwidth_counts=None if bw_counts is None else bw_counts.astype(np.int64),
            started_at=started,
            finished_at=finished,
            backend=self.backend,
            parameters=parameters,
        )


#: Passes of the recheck stage (every recheck pair alone, once per pass).
RECHECK_PASSES = 2
#: Timed lockstep steps of the sharing test (its pairs side by side, one message each).
SHARING_STEPS = 8
#: Most groups the recheck stage pairs up (their sibling pairs run one at a time).
RECHECK_MAX_GROUPS = 8


def recheck_pairs(
    bandwidth: NDArray[np.float64],
    hosts: Sequence[str],
    levels: Sequence[NDArray[np.int64]] | None = None,
) -> list[tuple[int, int]]:
    """One process pair per two sibling groups above the hosts, for the recheck stage.

    The groups are ``levels`` when given, else those
    :func:`bandwidth_levels` finds in the gathered bandwidth, so every
    process computes the same list. Levels with more than :data:`RECHECK_MAX_GROUPS`
    groups are left out (their sibling pairs would cost too many slots);
    the pair of groups ``g < h`` is their lowest ranks.

    Examples
    --------
    >>> rack = np.array([0, 1, 0, 1, 2, 2])
    >>> bw = np.where(rack[:, None] == rack[None, :], 100.0, 20.0)
    >>> recheck_pairs(bw, [f"h{i}" for i in range(6)])
    [(0, 1), (0, 4), (1, 4)]
    """
    if levels is None:
        levels = bandwidth_levels(bandwidth, hosts)
    pairs: list[tuple[int, int]] = []
    n = len(hosts)
    for k, lab in enumerate(levels[1:], start=1):
        parent = levels[k + 1] if k + 1 < len(levels) else np.zeros(n, dtype=np.int64)
        first = np.unique(lab, return_index=True)[1].tolist()  # lowest rank of each group
        if not 2 <= len(first) <= RECHECK_MAX_GROUPS:
            continue
        for i, a in enumerate(first):
            for b in first[i + 1 :]:
                if parent[a] == parent[b]:
                    pairs.append((min(a, b), max(a, b)))
    return pairs


def bandwidth_levels(
    bandwidth: NDArray[np.float64], hosts: Sequence[str]
) -> list[NDArray[np.int64]]:
    """The groups the all-pairs probe's recheck and sharing tests run on.

    :func:`rankopt.probe.hierarchy.infer_hierarchy` of the gathered
    bandwidth, single linkage, hosts first: the same on every process.
    """
    from rankopt.probe.hierarchy import infer_hierarchy

    return infer_hierarchy(bandwidth=bandwidth, hosts=hosts, linkage="single")


def pair_budget_cut(rtt: NDArray[np.float64], repeats: int) -> NDArray[np.int64]:
    """Timed round trips an initiator keeps, per pair, under :data:`PAIR_BUDGET`.

    ``rtt[k, j]`` is the ``j``-th timed round trip pair ``k`` would take. Ping
    ``j`` is the last when ``j + 1 >= MIN_PAIR_SAMPLES`` and the ``j`` before
    it add up to ``PAIR_BUDGET * repeats`` times their best -- the rule of
    the engine's initiator, vectorised for the plan and the simulation.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe._engine import pair_budget_cut
    >>> rtt = np.array([[1.0] * 10, [1.0, 30.0, 1.0, 1.0] + [1.0] * 6])
    >>> pair_budget_cut(rtt, 10).tolist()
    [10, 3]
    """
    rtt = np.asarray(rtt, dtype=np.float64)
    m = rtt.shape[0]
    used = np.full(m, repeats, dtype=np.int64)
    if m == 0 or repeats < 2:
        return used
    cum = np.cumsum(rtt, axis=1)
    best = np.minimum.accumulate(rtt, axis=1)
    open_ = np.ones(m, dtype=bool)
    for j in range(max(1, MIN_PAIR_SAMPLES - 1), repeats - 1):
        stop = open_ & (cum[:, j - 1] >= PAIR_BUDGET * repeats * best[:, j - 1])
        used[stop] = j + 1
        open_ &= ~stop
    return used


def _phase_seconds(started: float, timings: Sequence[tuple[str, int, float]]) -> list[list[Any]]:
    """``[phase, steps, seconds]`` of every phase, from the common finish times.

    Each phase lasts from the previous phase's latest finish (the start for the
    first) to its own; the figures are the same on every process.
    """
    out: list[list[Any]] = []
    last = started
    for name, steps, finished in timings:
        out.append([name, steps, round(max(finished - last, 0.0), 6)])
        last = finished
    return out


def run_probe(
    tr: Transport,
    params: ProbeParams,
    callback: Callable[[ProbeProgress], Any] | None,
    *,
    backend: str,
    hostname: str,
    topology: Any = None,
) -> Measurement:
    """Run the whole probe over ``tr``; the same :class:`Measurement` on every process.

    ``topology`` (a :class:`~rankopt.probe.topology_sources.TopologyLabels`,
    the same on every process) gives the groups: the bandwidth phase then
    discovers nothing (see :class:`~rankopt.probe.linear.LinearPlanner`'s ``given``).
    """
    return _Probe(tr, params, callback, backend, hostname, topology).run()


def run_with(
    cache: Callable[..., Measurement | None] | None,
    tr: Transport,
    params: ProbeParams,
    callback: Callable[[ProbeProgress], Any] | None,
    backend: str,
    hostname: str,
    root: int | None,
    topology: Any = None,
) -> Measurement | None:
    """The probe through ``cache`` (a probe runner such as ``ProbeCache``) or in full.

    With ``root`` only that process gets the measurement (the others None),
    and the runner is told (``root=``), so that it need not send a kept probe
    to every process.
    """
    m: Measurement | None
    if cache is None:
        m = run_probe(tr, params, callback, backend=backend, hostname=hostname, topology=topology)
    else:  # a runner is told only what it is given (one written before may not take it)
        extra: dict[str, Any] = {}
        if root is not None:
            extra["root"] = root
        if topology is not None:
            extra["topology"] = topology
        m = cache(tr, params, callback, backend=backend, hostname=hostname, **extra)
    return m if root is None or tr.rank == root else None
