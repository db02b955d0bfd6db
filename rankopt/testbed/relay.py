"""User-space delay relay: extra one-way latency on a link without ``netem``.

Contents
--------
start_relay
    Start a relay process in a namespace: it creates two tap devices and
    forwards every Ethernet frame from one to the other after a fixed delay.

The relay is the link: the testbed attaches one tap to each bridge and shapes
both taps with ``tbf`` like any other uplink (a tap's egress queue is the
kernel-to-relay direction, so the shaping stays in the kernel).  Standard
library only; run as a script so that it starts fast:
``python relay.py TAP_A TAP_B DELAY_S``.
"""

from __future__ import annotations

import collections
import fcntl
import os
import select
import struct
import subprocess
import sys
import time

__all__ = ["start_relay"]

_TUNSETIFF = 0x400454CA
_IFF_TAP = 0x0002
_IFF_NO_PI = 0x1000


def _open_tap(name: str) -> int:
    fd = os.open("/dev/net/tun", os.O_RDWR | os.O_NONBLOCK)
    fcntl.ioctl(fd, _TUNSETIFF, struct.pack("16sH", name.encode(), _IFF_TAP | _IFF_NO_PI))
    return fd


def relay(a: str, b: str, delay: float) -> None:
    """Forward frames between taps ``a`` and ``b`` with ``delay`` seconds each way."""
    fds = [_open_tap(a), _open_tap(b)]
    print("ready", flush=True)
    queues: list[collections.deque[tuple[float, bytes]]] = [
        collections.deque(),
        collections.deque(),
    ]
    poll = select.epoll()
    for fd in fds:
        poll.register(fd, select.EPOLLIN)
    while True:
        now = time.monotonic()
        waits = [q[0][0] - now for q in queues if q]
        timeout = max(0.0, min(waits)) if waits else 1.0
        for fd, _ in poll.poll(timeout):
            side = fds.index(fd)
            stamp = time.monotonic() + delay
            for _ in range(256):
                try:
                    frame = os.read(fd, 65536)
                except BlockingIOError:
                    break
                queues[side].append((stamp, frame))
        now = time.monotonic()
        for side, q in enumerate(queues):
            out = fds[1 - side]
            while q and q[0][0] <= now:
                try:
                    os.write(out, q.popleft()[1])
                except (BlockingIOError, OSError):
                    pass  # a full tap queue drops the frame, as a full link would


def start_relay(ns: str, a: str, b: str, delay: float) -> subprocess.Popen[str]:
    """Start a relay inside namespace ``ns``; returns once taps ``a`` and ``b`` exist."""
    from rankopt.testbed.topology import TestbedError

    p = subprocess.Popen(
        ["ip", "netns", "exec", ns, sys.executable, __file__, a, b, str(delay)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = p.stdout.readline().strip() if p.stdout else ""
    if line != "ready":
        p.kill()
        err = p.stderr.read() if p.stderr else ""
        raise TestbedError(f"delay relay for {a}<->{b} failed to start: {err.strip()}")
    return p


if __name__ == "__main__":
    relay(sys.argv[1], sys.argv[2], float(sys.argv[3]))
