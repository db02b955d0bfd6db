"""Tiny TCP throughput / round-trip tool run inside testbed namespaces.

Standard library only, run as a script (``python _netperf.py server|client ...``)
so that it starts fast.  The server prints one JSON line.

    server ADDR PORT MODE WARMUP     MODE = bw | rtt
    client ADDR PORT MODE SECONDS
"""

from __future__ import annotations

import json
import socket
import statistics
import sys
import time

_CHUNK = 1 << 20


def server(addr: str, port: int, mode: str, warmup: float) -> dict[str, float]:
    with socket.create_server((addr, port), reuse_port=False) as srv:
        srv.settimeout(30)
        print("ready", flush=True)
        conn, _ = srv.accept()
        with conn:
            conn.settimeout(30)
            if mode == "rtt":
                conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                while True:
                    b = conn.recv(1)
                    if not b:
                        return {}
                    conn.sendall(b)
            buf = bytearray(_CHUNK)
            t_first = None
            t_mark = None
            got = 0
            total = 0
            while True:
                k = conn.recv_into(buf)
                now = time.perf_counter()
                if k == 0:
                    break
                total += k
                if t_first is None:
                    t_first = now
                elif t_mark is None and now - t_first >= warmup:
                    t_mark, got = now, 0
                elif t_mark is not None:
                    got += k
                    t_last = now
            if t_mark is None or got == 0:
                return {"rate": total / max(now - (t_first or now), 1e-9), "bytes": total}
            return {"rate": got / (t_last - t_mark), "bytes": total}


def client(addr: str, port: int, mode: str, seconds: float) -> dict[str, float]:
    for _ in range(200):
        try:
            s = socket.create_connection((addr, port), timeout=30)
            break
        except OSError:
            time.sleep(0.02)
    else:
        raise SystemExit(f"cannot connect to {addr}:{port}")
    with s:
        if mode == "rtt":
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            rtts: list[float] = []
            end = time.perf_counter() + seconds
            while time.perf_counter() < end or len(rtts) < 10:
                t0 = time.perf_counter()
                s.sendall(b"x")
                s.recv(1)
                rtts.append(time.perf_counter() - t0)
            return {"rtt": statistics.median(rtts), "n": len(rtts)}
        data = bytes(_CHUNK)
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            s.sendall(data)
        s.shutdown(socket.SHUT_WR)
        s.recv(1)
    return {}


if __name__ == "__main__":
    role, addr, port, mode, x = sys.argv[1:6]
    fn = server if role == "server" else client
    print(json.dumps(fn(addr, int(port), mode, float(x))), flush=True)
