"""``python -m rankopt.run [options] -- program args``: renumber a torch.distributed job.

Start it in place of the program, under any launcher::

    torchrun --nproc-per-node 8 --nnodes 4 ... -m rankopt.run -- train.py --lr 0.1
    mpiexec -n 32 -x MASTER_ADDR=node0 python -m rankopt.run --backend nccl -- python train.py
    srun -n 32 python -m rankopt.run -- python train.py

Every process probes the network, rank 0 picks the order (rank 0 stays 0), and
each process then execs the program with its new ``RANK``. See
:mod:`rankopt.adapters._launch`.
"""

from __future__ import annotations

import sys

from rankopt.cli._run import main

if __name__ == "__main__":
    sys.exit(main())
