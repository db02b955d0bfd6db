"""Another tenant's traffic, run as a script inside a testbed namespace.

Standard library only (``python _tenant_flow.py sink|source ...``), so it starts
fast and imports nothing of rankopt.

    sink   ADDR PORT                       accept any number of flows, discard
    source ADDR PORT RATE ON OFF SEED      one TCP flow to ADDR:PORT

``RATE`` is bytes/s (0: as fast as TCP goes: unfair, bursty); ``ON``/``OFF``
seconds give an on/off pattern (``OFF`` 0: always on). ``SEED`` jitters the
first on-period's start so that flows do not switch in lockstep. A paced
source sends 16 KiB chunks on a fixed schedule (token bucket without burst),
so its rate is reproducible to the percent.
"""

from __future__ import annotations

import random
import socket
import sys
import threading
import time

_CHUNK = 16 << 10


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


def _connect(addr: str, port: int) -> socket.socket:
    for _ in range(500):
        try:
            return socket.create_connection((addr, port), timeout=30)
        except OSError:
            time.sleep(0.02)
    raise SystemExit(f"tenant source: cannot connect to {addr}:{port}")


def source(addr: str, port: int, rate: float, on: float, off: float, seed: int) -> None:
    s = _connect(addr, port)
    data = bytes(_CHUNK)
    gen = random.Random(seed)
    start = time.monotonic() + (gen.uniform(0, on + off) if off > 0 else 0.0)
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
            if due > now:
                time.sleep(due - now)
        s.sendall(data)
        sent += _CHUNK


if __name__ == "__main__":
    role = sys.argv[1]
    if role == "sink":
        sink(sys.argv[2], int(sys.argv[3]))
    else:
        a, p, r, on_s, off_s, sd = sys.argv[2:8]
        source(a, int(p), float(r), float(on_s), float(off_s), int(sd))
