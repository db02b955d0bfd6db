"""The model options every entry point shares, with one meaning and one default.

``rankopt solve``, ``rankopt compare``, ``python -m rankopt.mpi``, ``rankopt
run`` and :func:`rankopt.adapters.mpi.optimize` describe what to optimise with
the same flags: ``--collective``, ``--algorithm``, ``--objective``,
``--nbytes``, ``--uplink-bandwidth`` (one value per level of the network's
hierarchy), ``--method``, ``--seed``, ``--time-limit``, ``--robust``. With none of them the
network decides (:meth:`rankopt.Network.default_model`): the contention model
with the inferred uplinks at the entry point's default message size when the
network has bandwidth, the latency sum otherwise.

``--engine`` (``openmpi``, ``mpich``, ``gloo``, ``nccl``, ``mpi``: detect
from the loaded MPI library; ``none``) prices every call with the algorithm
that engine runs at its size, and ``--workload FILE`` (a JSON list or
``collective,nbytes,count`` lines) gives the job's mix of calls
(:mod:`rankopt.models.workload`). Defaults: ``python -m rankopt.mpi`` the
MPI library it runs under (``mpi``), ``rankopt run`` its ``--backend``
(``gloo``), ``rankopt solve`` none. An explicit ``--algorithm`` without
``--engine`` prices that algorithm as before.

A profile that recorded point-to-point traffic (``"traffic"``,
:mod:`rankopt.models.traffic`) has it priced too, beside its collective calls
(alone when it has none).

Without ``--workload``, ``$RANKOPT_WORKLOAD`` names the workload file. A
profile written by ``rankopt profile`` (:mod:`rankopt.adapters.profile`) names the
engine it was recorded on; an entry point without an engine of its own
(``rankopt solve``) prices the profile with it, so no engine-blind default is
left when a profile exists.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Sequence
from typing import Any

from rankopt._validation import RankoptInputError
from rankopt.units import format_size, parse_rates, parse_size

__all__ = [
    "add_entry_outputs",
    "topology_option",
    "add_model_arguments",
    "model_options",
    "launcher_model_options",
    "parse_uplinks",
    "size_type",
    "add_json_option",
    "check_json_destination",
    "write_json",
    "report",
    "workload_file",
    "ENTRY_ENGINES",
]

_OBJECTIVES = ("sum", "bottleneck", "time", "contention")

#: The engine an entry point prices with when neither ``--engine`` nor
#: ``--algorithm`` is given, by parser ``prog``: ``"mpi"`` detects the MPI
#: library (:func:`rankopt.engines.detect_mpi`), ``"backend"`` follows
#: ``--backend``.
ENTRY_ENGINES = {
    "python -m rankopt.mpi": "mpi",
    "rankopt run": "backend",
    "python -m rankopt.run": "backend",
}


class _LazyChoices(Sequence[str]):
    """A registry's names, read only when argparse needs them.

    argparse looks at ``choices`` when an option is given (``in``) or help is
    printed (iteration): a launch with default flags then never imports the
    models, engines and solvers just to build its parser, which matters on
    every rank of a large job.
    """

    def __init__(self, read: Callable[[], Sequence[str]]) -> None:
        self._read = read
        self._names: tuple[str, ...] | None = None

    def _get(self) -> tuple[str, ...]:
        if self._names is None:
            self._names = tuple(self._read())
        return self._names

    def __getitem__(self, i):  # type: ignore[no-untyped-def, override]
        return self._get()[i]

    def __len__(self) -> int:
        return len(self._get())

    def __contains__(self, name: object) -> bool:
        return name in self._get()

    def __repr__(self) -> str:
        return repr(list(self._get()))


def _collectives() -> list[str]:
    from rankopt.models import ALGORITHMS

    return sorted(ALGORITHMS)


def seed_value(text: str) -> int:
    """``--seed``: a non-negative integer (argparse then names the option).

    >>> seed_value("3")
    3
    """
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {text!r}.") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a non-negative integer; got {value}.")
    return value


def seconds_value(text: str) -> float:
    """``--time-limit``: a positive, finite number of seconds (argparse then names the option).

    >>> seconds_value("0.5")
    0.5
    """
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number of seconds; got {text!r}.") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be positive and finite; got {text!r}.")
    return value


def _algorithms() -> list[str]:
    from rankopt.models import ALGORITHMS

    return sorted({a for algs in ALGORITHMS.values() for a in algs})


def _engines() -> tuple[str, ...]:
    from rankopt.engines import names

    return (*names(), "mpi", "none")


def _methods() -> list[str]:
    from rankopt.solvers import METHODS

    return sorted(METHODS)


class _Algorithm(argparse.Action):
    """``--algorithm``: store it and remember that it was given."""

    def __call__(self, parser, namespace, values, option_string=None):  # type: ignore[override]
        setattr(namespace, self.dest, values)
        namespace.algorithm_given = True


def add_model_arguments(
    p: argparse.ArgumentParser,
    *,
    default_nbytes: float,
    nbytes_note: str = "",
    solver: bool = True,
    default_engine: str | None = None,
) -> None:
    """Add the model (and, with ``solver``, the solver) options to ``p``.

    ``default_engine`` is the engine used when neither ``--engine`` nor
    ``--algorithm`` is given (default: :data:`ENTRY_ENGINES` by ``p.prog``).
    """
    g = p.add_argument_group("what to optimise (default: what the network shows)")
    g.add_argument(
        "--collective",
        default="allreduce",
        choices=_LazyChoices(_collectives),
        metavar="NAME",
        help="collective to optimise for: %(choices)s (default: allreduce)",
    )
    g.add_argument(
        "--algorithm",
        default="ring",
        choices=_LazyChoices(_algorithms),
        metavar="NAME",
        action=_Algorithm,
        help="the algorithm the engine runs for it: %(choices)s (default: the engine's choice with an "
        "engine, else ring; on a collective without a ring, its ring pattern: chain for broadcast, "
        "ring_gather for reduce, pairwise for alltoall)",
    )
    engine = default_engine if default_engine is not None else ENTRY_ENGINES.get(p.prog)
    shown = {"mpi": "the MPI library it runs under", "backend": "--backend"}.get(
        str(engine), str(engine)
    )
    g.add_argument(
        "--engine",
        default=None,
        choices=_LazyChoices(_engines),
        metavar="NAME",
        help="%(choices)s: price each call with the algorithm this engine runs at its size "
        f"(default: {shown if engine else 'none'}; mpi = detect; none = --algorithm)",
    )
    g.add_argument(
        "--workload",
        default=None,
        metavar="FILE",
        help="the job's mix of calls: a JSON list, 'collective,nbytes,count' lines or a "
        "`rankopt profile` file (default: $RANKOPT_WORKLOAD, else one call of --collective "
        "at --nbytes)",
    )
    p.set_defaults(engine_default=engine, algorithm_given=False)
    g.add_argument(
        "--objective",
        default=None,
        choices=_OBJECTIVES,
        help="what to minimise (default: contention when the network has bandwidth and a "
        "hierarchy, the α-β time with bandwidth only, the latency sum otherwise)",
    )
    g.add_argument(
        "--nbytes",
        type=size_type("--nbytes", positive=True),
        default=None,
        metavar="SIZE",
        help=f"message size that bandwidth is priced at: bytes, or 16M, 16MiB, 64MB "
        f"(default: {format_size(default_nbytes)}{nbytes_note})",
    )
    g.add_argument(
        "--uplink-bandwidth",
        default=None,
        metavar="B[,B...]",
        help="uplink capacity: bytes/s, or a rate such as 25Gbit/s or 3GB/s; one value for "
        "every level of the hierarchy, or one per level, finest first (default: inferred "
        "from the measured bandwidth)",
    )
    if not solver:
        return
    s = p.add_argument_group("solver")
    s.add_argument(
        "--method",
        default="auto",
        choices=_LazyChoices(_methods),
        metavar="NAME",
        help="solver method: %(choices)s (default: auto, see rankopt.solvers.solve.auto_method)",
    )
    s.add_argument(
        "--seed",
        type=seed_value,
        default=0,
        help="solver seed: the same measurement gives the same order (default: 0)",
    )
    s.add_argument(
        "--time-limit",
        type=seconds_value,
        default=None,
        metavar="SECONDS",
        help="wall-clock guard for the solver (default: none; the budget is iterations)",
    )
    s.add_argument(
        "--robust",
        nargs="?",
        const="mean",
        default=None,
        metavar="STATISTIC",
        help="minimise over networks the measurement cannot tell apart: 'mean' (the "
        "default when given alone) or a quantile such as 0.9, of the cost over "
        "16 networks redrawn from the measured spreads (see rankopt.models.robust)",
    )


def add_json_option(p: argparse.ArgumentParser, what: str) -> None:
    """``--json [FILE]``: one meaning in every command.

    ``what`` is written as JSON to FILE, or to standard output when FILE is
    omitted or ``-``. A FILE that exists and does not end in ``.json`` is
    refused (:func:`check_json_destination`): ``--json net.npz`` is a
    misplaced flag, not a request to overwrite the network.
    """
    p.add_argument(
        "--json",
        nargs="?",
        const="-",
        default=None,
        metavar="FILE",
        help=f"{what} as JSON: to FILE, or to standard output without one (or with -)",
    )


def check_json_destination(dest: str | None) -> None:
    """Check ``--json``'s FILE before any work: writable, and not someone's input.

    Examples
    --------
    >>> check_json_destination("-"), check_json_destination(None)
    (None, None)
    """
    if dest is None or dest == "-":
        return
    import os

    from rankopt._files import check_writable

    if os.path.isfile(dest) and not str(dest).endswith(".json"):
        raise RankoptInputError(
            f"--json {dest!r}: that file exists and is not a .json file; give --json a "
            "name ending in .json, or `-` (or nothing, as the last option) for standard "
            "output."
        )
    check_writable(dest, what="--json")  # it is written after the work


def write_json(dest: str, text: str) -> None:
    """Write ``text`` (one JSON document) where ``--json`` points: a file or standard output."""
    import sys

    text = text if text.endswith("\n") else text + "\n"
    if dest == "-":
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from rankopt._files import atomic_write_text

    atomic_write_text(dest, text, what="--json")


def add_direction_trial_option(p: argparse.ArgumentParser) -> None:
    """``--no-direction-trial`` (``args.direction_trial``, default True): what every
    launcher offers to skip the ring-direction trial (:mod:`rankopt.adapters.direction`)."""
    p.add_argument(
        "--no-direction-trial",
        dest="direction_trial",
        action="store_false",
        help="apply the order found without timing it against its groups the other way "
        "round (done by default where another tenant loads the uplinks and the model "
        "prices both alike: a few calls of at most 4 MiB each)",
    )


def add_entry_outputs(p: argparse.ArgumentParser, *, engine: str) -> None:
    """``--json [FILE]``, ``--verify`` and ``--no-direction-trial``: what every launcher
    offers around its solve.

    ``engine`` names what ``--verify`` times the orders over (``"MPI"``, ``"Gloo"``).
    """
    add_json_option(
        p,
        "rank 0 writes the result (what was modelled, the modelled speedup and its interval, "
        "the order)",
    )
    p.add_argument(
        "--verify",
        action="store_true",
        help=f"time the order against the launch order first (rankopt verify over {engine}, "
        "default sizes) and run with the launch order unless the order measurably wins",
    )
    add_direction_trial_option(p)
    g = p.add_argument_group(
        "probe cache",
        "the probe of these hosts is kept (rank 0's user cache folder, or $RANKOPT_CACHE_DIR) "
        "and the next launch on the same hosts reuses it after a drift check of a few pairs",
    )
    g.add_argument("--no-cache", action="store_true", help="neither reuse nor keep a probe")
    g.add_argument(
        "--reprobe", action="store_true", help="probe in full whatever is kept, and keep that"
    )
    g.add_argument(
        "--cache-max-age",
        metavar="SECONDS",
        type=float,
        default=None,
        help="oldest kept probe reused (default: one day)",
    )
    g.add_argument("--cache-dir", metavar="DIR", default=None, help="the cache folder")
    g = p.add_argument_group(
        "provider topology",
        "groups from the provider or scheduler, read by every rank: the probe discovers "
        "nothing, it joins the hosts of each group and the groups and tests their uplinks",
    )
    g.add_argument(
        "--topology",
        metavar="FILE",
        default=None,
        help="Slurm topology.conf/.yaml, scontrol show topology, SLURM_TOPOLOGY_ADDR lines, "
        "AWS DescribeInstanceTopology, GCP instances, kubectl get nodes -o json, or "
        "`host rack pod` text",
    )
    g.add_argument(
        "--topology-aliases",
        metavar="FILE",
        default=None,
        help="`aws ec2 describe-instances` JSON: matches the hosts' DNS names and addresses "
        "to the instance IDs of an AWS --topology",
    )


def topology_option(args: argparse.Namespace) -> Any:
    """The probe's ``topology`` from ``--topology``/``--topology-aliases``, or None.

    Raises
    ------
    RankoptInputError
        ``--topology-aliases`` without ``--topology``, or a file that cannot be
        read as a topology (the message names the flag and the file).
    """
    path = getattr(args, "topology", None)
    aliases = getattr(args, "topology_aliases", None)
    if path is None:
        if aliases is not None:
            raise RankoptInputError("--topology-aliases needs --topology.")
        return None
    from rankopt.probe.topology_sources import read_topology

    try:
        return read_topology(path, aliases=aliases)
    except (RankoptInputError, OSError) as exc:
        message = str(exc)  # a file's own refusal names its flag already
        if "--topology" not in message:
            message = f"--topology {path}: {message}"
        raise RankoptInputError(message) from None


def cache_option(args: argparse.Namespace) -> dict[str, Any] | bool:
    """The probe's ``cache`` argument from the flags of :func:`add_entry_outputs`.

    ``True`` (the default cache) without flags, ``False`` with ``--no-cache``,
    else the :class:`rankopt.adapters.cache.ProbeCache` keywords the flags give.
    """
    if getattr(args, "no_cache", False):
        return False
    out: dict[str, Any] = {}
    if getattr(args, "reprobe", False):
        out["reprobe"] = True
    if getattr(args, "cache_max_age", None) is not None:
        age = args.cache_max_age
        if not age >= 0 or age == float("inf"):
            raise RankoptInputError(f"--cache-max-age must be finite and >= 0; got {age!r}.")
        out["max_age"] = age
    if getattr(args, "cache_dir", None):
        out["directory"] = args.cache_dir
    return out or True


def parse_uplinks(text: str | None, option: str = "--uplink-bandwidth") -> list[float] | None:
    """``"1.25e9,2Gbit/s"`` -> ``[1.25e9, 2.5e8]``; errors name the option.

    Each value is read by :func:`rankopt.units.parse_rate`.

    Examples
    --------
    >>> parse_uplinks("1e9, 2e8")
    [1000000000.0, 200000000.0]
    >>> parse_uplinks("10Gbit/s,2GB/s")
    [1250000000.0, 2000000000.0]
    """
    if text is None:
        return None
    return parse_rates(str(text), option)


def size_type(option: str, *, positive: bool = False) -> Callable[[str], int]:
    """An argparse ``type`` reading a size (``16M``, ``16MiB``, ``64MB``, ``1e6``).

    The error names ``option`` and gives the sizes it accepts; with ``positive``
    a size of 0 bytes is refused too (a launcher then refuses it before it probes).

    Examples
    --------
    >>> size_type("--nbytes")("16M")
    16777216
    """

    def parse(text: str) -> int:
        try:
            nbytes = parse_size(text, option)
        except RankoptInputError as e:
            raise argparse.ArgumentTypeError(str(e)) from None
        if positive and nbytes <= 0:
            raise argparse.ArgumentTypeError(f"{option} must be at least one byte; got {text!r}.")
        return nbytes

    parse.__name__ = "size"
    return parse


def model_options(
    args: argparse.Namespace, network: Any = None, *, solver: bool = False
) -> dict[str, Any]:
    """Keyword arguments of :func:`rankopt.solve` from the shared options.

    With ``solver``, ``method``, ``rng`` and ``time_limit`` are included.

    ``--uplink-bandwidth`` is checked against ``network``'s hierarchy: one
    value (every level) or one per level, and the error lists the levels.
    """
    out: dict[str, Any] = {}
    workload = workload_file(args)
    engine = _engine(args, workload)
    if engine is not None:
        out["engine"] = engine
    if workload is not None:
        from rankopt.models.workload import read_workload_file

        calls, traffic = read_workload_file(workload)
        if calls:
            out["workload"] = calls
        if traffic is not None:  # a profile of a program that sends point-to-point messages
            out["traffic"] = traffic
    for key in ("objective", "nbytes"):
        value = getattr(args, key, None)
        if value is not None:
            out[key] = value
    solver_keys = (("method", "method"), ("seed", "rng"), ("time_limit", "time_limit"))
    for key, name in solver_keys if solver else ():
        if getattr(args, key, None) is not None:
            out[name] = getattr(args, key)
    robust = getattr(args, "robust", None)
    if robust is not None:
        out["robust"] = {"statistic": _robust_statistic(robust)}
    ups = parse_uplinks(getattr(args, "uplink_bandwidth", None))
    if ups is not None:
        if network is None or not network.groups:
            raise RankoptInputError(
                "--uplink-bandwidth needs a hierarchy, and none was found in the network "
                "(give a probe or cloud .npz, whose hosts and bandwidth show the levels)."
            )
        levels = len(network.groups)
        if len(ups) not in (1, levels):
            from rankopt.network.core import describe_levels

            raise RankoptInputError(
                f"--uplink-bandwidth gives {len(ups)} values, but the network has {levels} "
                f"levels ({describe_levels(network.groups)}): give one value for all of "
                f"them or one per level, finest first."
            )
        out["groups"] = list(network.groups)
        out["uplink_bandwidth"] = ups if len(ups) > 1 else ups[0]
        out.setdefault("objective", "contention")
    return out


def _robust_statistic(text: str) -> str | float:
    """``--robust``'s value: ``"mean"`` or a quantile in (0, 1)."""
    if text == "mean":
        return "mean"
    try:
        q = float(text)
    except ValueError:
        q = float("nan")
    if not 0.0 < q < 1.0:
        raise RankoptInputError(
            f"--robust takes 'mean' or a quantile between 0 and 1 (e.g. 0.9); got {text!r}."
        )
    return q


def launcher_model_options(args: argparse.Namespace) -> dict[str, Any]:
    """:func:`model_options` (with the solver's) for a launcher, before it has probed.

    The hierarchy is not known yet, so ``--uplink-bandwidth`` is passed on as
    given and checked against the probed levels when the order is solved.
    """
    ups = parse_uplinks(getattr(args, "uplink_bandwidth", None))
    plain = argparse.Namespace(**{**vars(args), "uplink_bandwidth": None})
    out = model_options(plain, None, solver=True)
    if ups is not None:
        out["uplink_bandwidth"] = ups if len(ups) > 1 else ups[0]
        out.setdefault("objective", "contention")
    return out


def workload_input(args: argparse.Namespace) -> tuple[str, str | None]:
    """The workload file as an input a command reads: ``(where it came from, path)``."""
    given = getattr(args, "workload", None) is not None
    return ("--workload" if given else "$RANKOPT_WORKLOAD", workload_file(args))


def workload_file(args: argparse.Namespace) -> str | None:
    """``--workload``, else ``$RANKOPT_WORKLOAD``, else None."""
    import os

    given = getattr(args, "workload", None)
    if given is not None:
        return str(given)
    return os.environ.get("RANKOPT_WORKLOAD") or None


def _engine(args: argparse.Namespace, workload: str | None = None) -> str | None:
    """The engine the options ask for (see the module docstring for the defaults)."""
    given = getattr(args, "engine", None)
    algorithm_given = bool(getattr(args, "algorithm_given", False))
    if given is not None and given != "none" and algorithm_given:
        raise RankoptInputError(
            f"--engine {given} decides the algorithm of every call; --algorithm "
            f"{getattr(args, 'algorithm', None)} as well is ambiguous: give one of them."
        )
    if given == "none":
        return None
    if given is None:
        if algorithm_given:
            return None
        given = getattr(args, "engine_default", None)
        if given is None and workload is not None:  # a profile names the engine it ran on
            from rankopt.adapters.profile import workload_engine

            given = workload_engine(workload)
        if given == "backend":
            given = getattr(args, "backend", None)
    if given == "mpi":
        from rankopt.engines import detect_mpi

        given = detect_mpi()
    return given


def report(result: Any, hosts: Sequence[str] | None = None, *, table_max: int = 64) -> str:
    """What every entry point prints: the summary and the new-rank table.

    The table is left out above ``table_max`` processes (pass a larger one).
    """
    text = result.summary()
    cache = result.extra.get("probe_cache") if hasattr(result, "extra") else None
    if cache:
        from rankopt.adapters.cache import describe_cache

        text += "\n" + describe_cache(cache)
    if len(result.order) <= table_max:
        text += "\n" + result.rank_table(hosts)
    else:
        text += f"\n  ({len(result.order)} processes: rank table left out)"
    return text
