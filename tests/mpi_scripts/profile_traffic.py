"""Point-to-point traffic of known sizes, for ``rankopt profile`` (4 ranks).

Every call below sends what ``tests/test_profile.py::expected_traffic``
counts: a 1-D ring halo exchange (``Sendrecv``, ``Sendrecv_replace``),
``Isend``/``Irecv`` to the opposite rank, a send on a sub-communicator whose
ranks are not the world's, a persistent send (``Send_init``, started by
``Start`` and ``Startall``), neighbourhood collectives on a periodic ring
(also persistent), a non-periodic 2 x 2 grid and a distributed graph, an
uneven ``Alltoallv`` (also persistent) and one-sided ``Put`` and ``Get``.
"""

import numpy as np
from mpi4py import MPI

c = MPI.COMM_WORLD
r, p = c.Get_rank(), c.Get_size()
assert p == 4, "run on 4 ranks"
right, left, opposite = (r + 1) % p, (r - 1) % p, (r + 2) % p

# ring halo exchange: 100 doubles each way, 3 steps; 10 int32 right, replaced in place
halo, got = np.zeros(100), np.empty(100)
for _ in range(3):
    c.Sendrecv(halo, dest=right, recvbuf=got, source=left)
    c.Sendrecv(halo, dest=left, recvbuf=got, source=right)
c.Sendrecv_replace(np.zeros(10, dtype=np.int32), dest=right, source=left)

# non-blocking: 1000 int32 to the opposite rank, twice
out, into = np.zeros(1000, dtype=np.int32), np.empty(1000, dtype=np.int32)
for _ in range(2):
    MPI.Request.Waitall([c.Irecv(into, source=opposite), c.Isend(out, dest=opposite)])

# a sub-communicator in reverse order: its rank 0 is world rank 2 (3), its rank 1 world 0 (1)
sub = c.Split(r % 2, key=-r)
if sub.Get_rank() == 0:
    sub.Send(np.zeros(33, dtype=np.uint8), dest=1)
else:
    sub.Recv(np.empty(33, dtype=np.uint8), source=0)
sub.Free()

# persistent: 16 doubles to the right, started 3 + 2 times
sbuf, rbuf = np.zeros(16), np.empty(16)
sreq, rreq = c.Send_init(sbuf, dest=right), c.Recv_init(rbuf, source=left)
for _ in range(3):
    sreq.Start()
    rreq.Start()
    MPI.Request.Waitall([sreq, rreq])
for _ in range(2):
    MPI.Prequest.Startall([sreq, rreq])
    MPI.Request.Waitall([sreq, rreq])
sreq.Free()
rreq.Free()

# neighbourhood collectives: a periodic ring (5 int32 to each side) ...
ring = c.Create_cart([p], periods=[True])
ring.Neighbor_alltoall(np.zeros(10, dtype=np.int32), np.empty(10, dtype=np.int32))
# ... persistent: 3 int32 to each side, started twice ...
req = ring.Neighbor_alltoall_init(np.zeros(6, dtype=np.int32), np.empty(6, dtype=np.int32))
for _ in range(2):
    req.Start()
    req.Wait()
req.Free()
ring.Free()
# ... a non-periodic 2 x 2 grid (3 doubles to each neighbour; the edges are MPI_PROC_NULL) ...
grid = c.Create_cart([2, 2], periods=[False, False])
grid.Neighbor_allgather(np.zeros(3), np.empty(12))
grid.Free()
# ... and a distributed graph: 1 double to the right, 2 to the opposite rank
graph = c.Create_dist_graph_adjacent([left, opposite], [right, opposite])
counts = ([1, 2], [0, 1])
graph.Neighbor_alltoallv([np.zeros(3), counts, MPI.DOUBLE], [np.empty(3), counts, MPI.DOUBLE])
graph.Free()

# uneven all-to-all: 10 r + j + 1 int32 from rank r to rank j
sc = np.array([10 * r + j + 1 for j in range(p)])
rc = np.array([10 * j + r + 1 for j in range(p)])
sd, rd = np.concatenate([[0], np.cumsum(sc)[:-1]]), np.concatenate([[0], np.cumsum(rc)[:-1]])
c.Alltoallv(
    [np.zeros(sc.sum(), dtype=np.int32), (sc, sd), MPI.INT32_T],
    [np.empty(rc.sum(), dtype=np.int32), (rc, rd), MPI.INT32_T],
)

# persistent all-to-all: j + 1 doubles to rank j, started once
sc, rc = np.arange(1, p + 1), np.full(p, r + 1)
req = c.Alltoallv_init(
    [np.zeros(sc.sum()), (sc, None), MPI.DOUBLE], [np.empty(rc.sum()), (rc, None), MPI.DOUBLE]
)
MPI.Prequest.Startall([req])
req.Wait()
req.Free()

# one-sided: rank 0 puts 25 doubles into rank 3, rank 1 gets 7 doubles from rank 2
win = MPI.Win.Allocate(8 * 64, disp_unit=8, comm=c)
win.Fence()
if r == 0:
    win.Put(np.ones(25), target_rank=3)
if r == 1:
    win.Get(np.empty(7), target_rank=2)
win.Fence()
win.Free()
