"""Another tenant's traffic, run as a script inside a testbed namespace.

Standard library only (``python _tenant_flow.py sink|source ...``), so it starts
fast and imports nothing of rankopt.

    sink   ADDR PORT                       accept any number of flows, discard
    source ADDR PORT RATE ON OFF SEED      one TCP flow to ADDR:PORT
    usink  ADDR PORT                       receive UDP datagrams, discard
    usource ADDR PORT RATE ON OFF SEED     one paced UDP flow to ADDR:PORT

``RATE`` is bytes/s (TCP 0: as fast as TCP goes: unfair, bursty; UDP needs a
rate and does not back off when the link is full, as a media stream or
another tenant's unresponsive traffic); ``ON``/``OFF``
seconds give an on/off pattern (``OFF`` 0: always on). ``SEED`` draws the phase
of the cycle each flow starts at, so that flows do not switch in lockstep. A paced
source sends 16 KiB chunks on a fixed schedule: a token bucket ``_BURST_S``
deep, so that a flow held back by a full link catches up by at most that much
and does not burst to make up a whole slow period; its rate is reproducible
to the percent.

A sink writes one line, ``ready``, on stdout once it listens: the handshake
:class:`rankopt.testbed.tenant.Tenant` waits for before it starts the
sources. Nothing else is written.
"""

from __future__ import annotations

import random
import socket
import sys
import threading
import time

_CHUNK = 16 << 10
_DATAGRAM = 1400  # below the testbed links' MTU: no IP fragments
_BURST_S = 0.05  # backlog a paced flow may catch up on, seconds of its rate


def _drain(conn: socket.socket) -> None:
    buf = bytearray(1 << 20)
    with conn:
        try:
            while conn.recv_into(buf):
                pass
        except OSError:
            pass


def sink(addr: str, port: int) -> None:
    with socket.create_server((addr, port), reuse_port=False) as srv:
        print("ready", flush=True)
        while True:
            conn, _ = srv.accept()
            threading.Thread(target=_drain, args=(conn,), daemon=True).start()


def usink(addr: str, port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as srv:
        srv.bind((addr, port))
        print("ready", flush=True)
        buf = bytearray(1 << 16)
        while True:
            srv.recv_into(buf)


def _connect(addr: str, port: int) -> socket.socket:
    for _ in range(500):
        try:
            return socket.create_connection((addr, port), timeout=30)
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"tenant source: cannot connect to {addr}:{port}")


def cycle_start(now: float, on: float, off: float, seed: int) -> float:
    """When a flow's on/off cycle began, drawn so that at ``now`` it is at a random phase
    of it, on or off (``now`` with no pattern). A flow that sent until a random first
    start and then began with an on-period was on through its first ``on`` seconds for
    sure: all of a half-minute neighbour's flows through the first probe and job."""
    return now - (random.Random(seed).uniform(0, on + off) if off > 0 else 0.0)


def source(
    addr: str, port: int, rate: float, on: float, off: float, seed: int, udp: bool = False
) -> None:
    if udp:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.connect((addr, port))
        chunk = _DATAGRAM
    else:
        s = _connect(addr, port)
        chunk = _CHUNK
    data = bytes(chunk)
    start = cycle_start(time.monotonic(), on, off, seed)
    sent = 0.0
    epoch = time.monotonic()
    while True:
        now = time.monotonic()
        if off > 0 and now >= start:
            phase = (now - start) % (on + off)
            if phase >= on:  # off: sleep to the next on-period, restart the pacing clock
                time.sleep(on + off - phase)
                epoch, sent = time.monotonic(), 0.0
                continue
        if rate > 0:
            due = epoch + sent / rate
            if due < now - _BURST_S:  # held back: forget the backlog beyond the bucket
                epoch += now - _BURST_S - due
                due = now - _BURST_S
            if due > now:
                time.sleep(due - now)
        try:
            s.sendall(data)
        except OSError:  # UDP: a full queue drops the datagram, as on a real link
            pass
        sent += chunk


if __name__ == "__main__":
    role = sys.argv[1]
    if role in ("sink", "usink"):
        (usink if role == "usink" else sink)(sys.argv[2], int(sys.argv[3]))
    else:
        a, p, r, on_s, off_s, sd = sys.argv[2:8]
        source(a, int(p), float(r), float(on_s), float(off_s), int(sd), udp=role == "usource")
