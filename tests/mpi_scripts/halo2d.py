"""A 2-D stencil's halo exchange (mpi4py): the point-to-point traffic of a grid code.

``python halo2d.py ROWSxCOLS BYTES ITERATIONS`` on ROWS * COLS ranks, rank
``r`` at row ``r // COLS``, column ``r % COLS`` (row-major, not periodic).
Every iteration each rank exchanges ``BYTES`` with each of its up to four
neighbours (``Sendrecv``: left/right, then up/down) and the ranks meet in a
barrier. Rank 0 prints ``total_s SECONDS`` (the slowest rank's time of the
timed iterations, after one untimed) and ``iteration_s SECONDS`` (their
median iteration).
"""

import sys

import numpy as np
from mpi4py import MPI


def main() -> None:
    comm = MPI.COMM_WORLD
    rows, cols = (int(x) for x in sys.argv[1].lower().split("x"))
    nbytes, iterations = int(float(sys.argv[2])), int(sys.argv[3])
    if rows * cols != comm.size:
        raise SystemExit(f"grid {rows}x{cols} needs {rows * cols} ranks; got {comm.size}")
    me = comm.rank
    r, c = divmod(me, cols)

    def at(i: int, j: int) -> int:
        return i * cols + j if 0 <= i < rows and 0 <= j < cols else MPI.PROC_NULL

    pairs = [(at(r, c - 1), at(r, c + 1)), (at(r - 1, c), at(r + 1, c))]
    out = np.ones(nbytes, dtype=np.uint8)
    inbox = np.empty(nbytes, dtype=np.uint8)
    times = []
    for it in range(iterations + 1):
        comm.Barrier()
        t = MPI.Wtime()
        for a, b in pairs:  # to one side and from the other, then back
            comm.Sendrecv(out, dest=b, recvbuf=inbox, source=a)
            comm.Sendrecv(out, dest=a, recvbuf=inbox, source=b)
        comm.Barrier()
        if it:
            times.append(MPI.Wtime() - t)
    slowest = comm.reduce(float(np.sum(times)), op=MPI.MAX, root=0)
    median = comm.reduce(float(np.median(times)), op=MPI.MAX, root=0)
    if me == 0:
        print(f"total_s {slowest:.6f}")
        print(f"iteration_s {median:.6f}", flush=True)


if __name__ == "__main__":
    main()
