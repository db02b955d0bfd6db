"""Profiles: the collective calls and point-to-point traffic of an unmodified program.

``rankopt profile -- mpiexec -n 8 ./app`` (or ``-- torchrun ... train.py``)
runs the program once as launched, with two recorders that do not change
what it does:

- MPI programs (C, C++, Fortran through the C bindings, mpi4py): the PMPI shim
  (:mod:`rankopt.adapters.shim`) with ``RANKOPT_PROFILE`` set counts every blocking and
  non-blocking allreduce, broadcast, reduce, allgather(v), alltoall(v),
  reduce_scatter(_block) and barrier per (collective, bytes, communicator
  size), with the time of the blocking ones, and the point-to-point traffic
  (below).
- torch programs: a ``sitecustomize`` put first on ``PYTHONPATH`` wraps
  ``torch.distributed``'s collectives (tensor bytes) and point-to-point calls,
  and gives ``DistributedDataParallel`` models without a communication hook
  PyTorch's default ``allreduce_hook``, so every gradient bucket is an
  allreduce of its size (:mod:`rankopt.adapters._profile_hook`).

Each process writes ``mpi-rank-R.tsv`` / ``torch-rank-R.tsv`` into a folder;
the command merges them into one :class:`Profile` and writes it as JSON.

Contents
--------
ProfileEntry
    One class of calls: collective, bytes, communicator size, count, seconds.
Profile
    The merged profile; :meth:`Profile.workload` is what the solver prices.
read_rank_files
    Merge a folder of per-process files.
read_profile, write_profile
    The JSON file (a workload file every entry point reads).
profile_command
    The command line and environment that run a program under the recorders.
run_profile
    Run, merge, write: what ``rankopt profile`` does.

Notes
-----
**The file.** A JSON object ``{"rankopt_profile": 1, "engine": ...,
"world_size": P, "workload": [{"collective", "nbytes", "count",
"comm_size", "seconds"}, ...], "other": [...], ...}``.
:func:`rankopt.models.workload.load_workload` reads its ``"workload"`` list,
so ``rankopt solve --workload profile.json``, ``python -m rankopt.mpi
--workload``, ``rankopt run --workload`` and ``rankopt run-mpi --workload``
take it as it is; so does ``RANKOPT_WORKLOAD=profile.json`` when no
``--workload`` is given. The workload holds the calls on communicators of
the whole job's size whose collective rankopt models; calls on smaller
communicators, ``alltoallv``, barriers and zero-byte calls are kept under
``"other"`` (reported, not priced).

**Engine.** The file names the engine that ran the calls (``openmpi`` or
``mpich`` from the MPI library's version string, torch's backend). An entry
point with no engine of its own (``rankopt solve``) prices the profile with
it, unless ``--engine`` or ``--algorithm`` is given: no engine-blind default
is left when a profile exists.

**Counts.** Every process of a communicator makes the same calls, so a
class's count is the largest count any one process recorded (and its
seconds that process's time); processes that disagree on a world-sized class
are listed in ``notes`` (not ``alltoallv``, whose sizes are each process's own).

**Point-to-point traffic.** Besides the collectives, the recorders count the
bytes and messages each process sends every other one, by launch rank
(``MPI_COMM_WORLD`` rank; torch's global rank; ranks of other communicators
and groups are translated):

- MPI: ``MPI_Send``/``Bsend``/``Ssend``/``Rsend`` and their ``I`` forms; the
  persistent sends (``MPI_Send_init`` & co., ``MPI_Psend_init``) at every
  ``MPI_Start``/``MPI_Startall``; the send half of ``MPI_Sendrecv``,
  ``MPI_Sendrecv_replace`` (and ``MPI_Isendrecv``...); the send blocks of
  ``MPI_Alltoallv``/``Alltoallw`` (an uneven all-to-all is traffic, not a
  priced collective) and of the neighbourhood collectives
  (``MPI_Neighbor_alltoall(v/w)``, ``MPI_Neighbor_allgather(v)``, their
  ``I`` and persistent forms) to the out-neighbours of the cartesian, graph
  or distributed-graph topology, in the standard's order; one-sided
  ``MPI_Put``, ``MPI_Accumulate``, ``MPI_Get_accumulate``,
  ``MPI_Fetch_and_op``, ``MPI_Compare_and_swap`` (origin to target; the
  result back) and ``MPI_Get`` (target to origin), ``R`` forms included.
  Bytes are counts times ``MPI_Type_size``; ``MPI_PROC_NULL`` partners are
  skipped; a zero-byte send is a message, a zero-byte block of a collective
  is not.
- torch: ``send``, ``isend``, the ``isend`` operations of
  ``batch_isend_irecv``, and ``all_to_all_single`` with uneven
  ``input_split_sizes`` (split times the bytes of an input row per
  destination) and ``all_to_all`` with tensors of different sizes (recorded
  as the collective ``alltoallv``, not priced, like MPI's).

Each process writes lines ``p2p<TAB>src<TAB>dst<TAB>bytes<TAB>messages``
into its file; the merge adds them up into one
:class:`rankopt.models.traffic.Traffic` (``Profile.traffic``), written under
the profile's ``"traffic"`` key in the versioned traffic format::

    "traffic": {"rankopt_traffic": 1, "n": P,
                "pairs": [[src, dst, bytes, messages], ...]}

(:func:`rankopt.models.traffic.load_traffic` reads it from the profile; the
key is absent when no traffic was recorded). Traffic of a process to itself
is dropped. Files without ``p2p`` lines (older profiles) read as before.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rankopt._files import read_text_file
from rankopt._validation import RankoptInputError

if TYPE_CHECKING:
    from rankopt.models.traffic import Traffic

__all__ = [
    "ProfileEntry",
    "Profile",
    "read_rank_files",
    "read_profile",
    "write_profile",
    "profile_command",
    "run_profile",
    "workload_engine",
    "HOOK_SOURCE",
]

#: The torch hook, copied as ``sitecustomize.py`` for a profiled run.
HOOK_SOURCE = Path(__file__).with_name("_profile_hook.py")

_MPI_LAUNCHERS = ("mpiexec", "mpirun", "orterun", "prterun", "srun", "mpiexec.hydra")
_HEADER = re.compile(r"^#\s*rankopt profile 1\s+(.*)$")
#: One (src, dst, bytes, messages) line of a per-process file.
_Flow = tuple[int, int, int, int]


@dataclass(frozen=True)
class ProfileEntry:
    """``count`` calls of ``collective`` on ``nbytes`` bytes in communicators of ``comm_size``.

    ``seconds`` is the recorded time of those calls (blocking calls only).
    """

    collective: str
    nbytes: float
    comm_size: int
    count: int
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "collective": self.collective,
            "nbytes": int(self.nbytes) if float(self.nbytes).is_integer() else self.nbytes,
            "count": self.count,
            "comm_size": self.comm_size,
            "seconds": round(self.seconds, 9),
        }


@dataclass(frozen=True)
class Profile:
    """A program's collective calls, merged over its processes.

    Attributes
    ----------
    entries : tuple of ProfileEntry
        Every recorded class, largest total bytes first.
    world_size : int
        Processes in the job.
    engine : str or None
        ``"openmpi"``, ``"mpich"``, ``"gloo"``, ``"nccl"``, or None when unknown.
    source : str
        ``"mpi"`` (the shim) or ``"torch"`` (the hook).
    processes : int
        Per-process files merged.
    command : tuple of str
        The profiled command, when known.
    notes : tuple of str
        Disagreements between processes and what was left out.
    traffic : rankopt.models.traffic.Traffic or None
        The point-to-point traffic by launch rank (bytes and messages per
        source and destination), or None when none was recorded.
    """

    entries: tuple[ProfileEntry, ...]
    world_size: int
    engine: str | None = None
    source: str = "mpi"
    processes: int = 0
    command: tuple[str, ...] = ()
    notes: tuple[str, ...] = field(default=())
    traffic: Traffic | None = field(default=None, compare=False)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Profile):
            return NotImplemented
        return self.to_dict() == other.to_dict()

    def _priced(self, e: ProfileEntry) -> bool:
        from rankopt.models.schedule import ALGORITHMS

        return e.collective in ALGORITHMS and e.nbytes > 0 and e.comm_size == self.world_size

    def workload(self) -> tuple[Any, ...]:
        """The calls the solver prices, as :class:`rankopt.models.workload.Call`.

        Examples
        --------
        >>> p = Profile((ProfileEntry("allreduce", 4096, 4, 20),
        ...              ProfileEntry("allreduce", 64, 2, 5)), world_size=4)
        >>> p.workload()
        (Call(collective='allreduce', nbytes=4096.0, count=20.0),)
        """
        from rankopt.models.workload import Call

        return tuple(
            Call(e.collective, float(e.nbytes), float(e.count))
            for e in self.entries
            if self._priced(e)
        )

    def others(self) -> tuple[ProfileEntry, ...]:
        """Recorded classes that are not in :meth:`workload`."""
        return tuple(e for e in self.entries if not self._priced(e))

    def to_dict(self) -> dict[str, Any]:
        return {
            "rankopt_profile": 1,
            "engine": self.engine,
            "source": self.source,
            "world_size": self.world_size,
            "processes": self.processes,
            "command": list(self.command),
            "workload": [e.to_dict() for e in self.entries if self._priced(e)],
            "other": [e.to_dict() for e in self.others()],
            "notes": list(self.notes),
            **({"traffic": self.traffic.to_dict()} if self.traffic is not None else {}),
        }

    def summary(self) -> str:
        """A table of the classes, workload first."""
        from rankopt.units import format_size

        lines = [
            f"profile: {self.world_size} processes ({self.processes} files), "
            f"engine {self.engine or 'unknown'}, {len(self.workload())} workload classes"
        ]
        lines.append(f"  {'collective':<15} {'bytes':>12} {'comm':>5} {'count':>8} {'seconds':>10}")
        for e in self.entries:
            mark = "" if self._priced(e) else "  (not priced)"
            lines.append(
                f"  {e.collective:<15} {format_size(e.nbytes):>12} {e.comm_size:>5} "
                f"{e.count:>8} {e.seconds:>10.4g}{mark}"
            )
        t = self.traffic
        if t is not None:
            lines.append(
                f"  point-to-point: {t.nnz:,} pairs, {format_size(t.total_bytes)} in "
                f"{int(t.total_messages):,} messages"
            )
        lines += [f"  note: {n}" for n in self.notes]
        return "\n".join(lines)


def _engine_of(source: str, meta: Mapping[str, str], library: str) -> str | None:
    from rankopt.engines import from_backend, from_library

    if source == "torch":
        engine = from_backend(meta.get("backend", ""))
        return None if engine is None else engine.name
    return from_library(library).name if library else None


def _read_rank_file(
    path: Path,
) -> tuple[dict[str, str], str, list[ProfileEntry], list[_Flow]]:
    meta: dict[str, str] = {}
    library = ""
    rows: list[ProfileEntry] = []
    flows: list[_Flow] = []
    for lineno, line in enumerate(path.read_text().splitlines(), 1):
        if line.startswith("#"):
            m = _HEADER.match(line)
            if m is not None:
                for kv in m[1].split():
                    key, _, value = kv.partition("=")
                    meta[key] = value
            elif line.startswith("# library "):
                library = line[len("# library ") :].strip()
            continue
        if not line.strip():
            continue
        parts = line.split("\t")
        if parts[0] == "p2p":
            try:
                src, dst, nb, msgs = (int(v) for v in parts[1:])
            except ValueError:
                raise RankoptInputError(
                    f"profile file {str(path)!r} line {lineno}: expected "
                    f"'p2p<TAB>src<TAB>dst<TAB>bytes<TAB>messages'; got {line!r}."
                ) from None
            flows.append((src, dst, nb, msgs))
            continue
        try:
            kind, nbytes, comm, count = parts[0], float(parts[1]), int(parts[2]), int(parts[3])
            seconds = float(parts[4]) if len(parts) > 4 else 0.0
        except (IndexError, ValueError):
            raise RankoptInputError(
                f"profile file {str(path)!r} line {lineno}: expected "
                f"'collective<TAB>nbytes<TAB>comm_size<TAB>count<TAB>seconds'; got {line!r}."
            ) from None
        rows.append(ProfileEntry(kind, nbytes, comm, count, seconds))
    if "source" not in meta:
        raise RankoptInputError(
            f"profile file {str(path)!r} has no '# rankopt profile 1' header line."
        )
    return meta, library, rows, flows


def _traffic(flows: list[_Flow], world: int, folder: Path) -> Traffic | None:
    """The merged traffic of the processes' ``p2p`` lines (None without any)."""
    if not flows:
        return None
    from rankopt.models.traffic import Traffic

    n = world or 1 + max(max(f[0], f[1]) for f in flows)
    src, dst, nbytes, messages = zip(*flows, strict=True)
    t = Traffic.from_pairs(
        n, src, dst, nbytes, messages, where=f"profile files in {str(folder)!r}: traffic"
    )
    return t if t.nnz else None


def read_rank_files(folder: str | os.PathLike[str], *, command: Sequence[str] = ()) -> Profile:
    """Merge the per-process files (``mpi-rank-*.tsv``, ``torch-rank-*.tsv``) of a folder.

    Parameters
    ----------
    folder : str or path-like
        Where the recorders wrote (``RANKOPT_PROFILE``).
    command : sequence of str
        The profiled command, kept in the profile.

    Returns
    -------
    Profile

    Raises
    ------
    rankopt.RankoptInputError
        If the folder holds no profile files, or one is malformed.

    Notes
    -----
    When both recorders wrote (an mpi4py program that also uses
    ``torch.distributed``), the MPI files are kept: they see every MPI call.
    """
    folder = Path(folder)
    files = {src: sorted(folder.glob(f"{src}-rank-*.tsv")) for src in ("mpi", "torch")}
    source = "mpi" if files["mpi"] else "torch"
    chosen = files[source]
    if not chosen:
        raise RankoptInputError(
            f"no profile files in {str(folder)!r}: the program made no recorded call, did not reach MPI_Finalize (MPI) or did not exit normally (torch)."
        )
    merged: dict[tuple[str, float, int], list[ProfileEntry]] = {}
    flows: list[_Flow] = []
    world = 0
    engine = None
    for path in chosen:
        meta, library, rows, more = _read_rank_file(path)
        flows += more
        try:
            world = max(world, int(meta.get("world_size", 0)))
        except ValueError:
            pass
        engine = engine or _engine_of(source, meta, library)
        for r in rows:
            merged.setdefault((r.collective, r.nbytes, r.comm_size), []).append(r)
    notes = []
    if source == "mpi" and files["torch"]:
        notes.append("torch.distributed calls were recorded too; the MPI calls are kept.")
    entries = []
    for (kind, nbytes, comm), rows in merged.items():
        top = max(rows, key=lambda r: (r.count, r.seconds))
        counts = {r.count for r in rows}
        uneven = kind == "alltoallv"  # each process's own sizes: classes differ by design
        if comm == world and not uneven and (len(counts) > 1 or len(rows) != len(chosen)):
            notes.append(
                f"{kind} of {nbytes:g} bytes on all {world} processes: counts differ between "
                f"processes ({len(rows)} of {len(chosen)} files, counts "
                f"{min(counts)}..{max(counts)}); the largest is kept."
            )
        entries.append(ProfileEntry(kind, nbytes, comm, top.count, top.seconds))
    entries.sort(key=lambda e: (-e.nbytes * e.count, e.collective, e.nbytes, e.comm_size))
    if world and len(chosen) != world:
        notes.append(f"{len(chosen)} process files for a job of {world} processes.")
    traffic = _traffic(flows, world, folder)
    return Profile(
        tuple(entries),
        world,
        engine,
        source,
        len(chosen),
        tuple(command),
        tuple(notes),
        traffic,
    )


def write_profile(path: str | os.PathLike[str], profile: Profile) -> Path:
    """Write ``profile`` as JSON (a workload file every entry point reads)."""
    from rankopt._files import atomic_write_text

    p = Path(path)
    atomic_write_text(p, json.dumps(profile.to_dict(), indent=1) + "\n", what="profile")
    return p


def read_profile(path: str | os.PathLike[str]) -> Profile:
    """Read a profile written by :func:`write_profile`.

    Raises
    ------
    rankopt.RankoptInputError
        If the file is not a rankopt profile, or its ``"traffic"`` is not a
        valid traffic object (the message names the pair and the field).
    """
    p = Path(path)
    text = read_text_file(p, "profile")  # a FIFO, device or huge file is refused unread
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise RankoptInputError(f"cannot read the profile {str(p)!r} ({exc}).") from None
    if not isinstance(data, Mapping) or data.get("rankopt_profile") != 1:
        raise RankoptInputError(f"{str(p)!r} is not a rankopt profile (no 'rankopt_profile': 1).")

    def entry(d: Mapping[str, Any]) -> ProfileEntry:
        return ProfileEntry(
            str(d["collective"]),
            float(d["nbytes"]),
            int(d.get("comm_size", data.get("world_size", 0))),
            int(d.get("count", 1)),
            float(d.get("seconds", 0.0)),
        )

    entries = tuple(entry(d) for d in [*data.get("workload", ()), *data.get("other", ())])
    traffic = None
    if "traffic" in data:
        from rankopt.models.traffic import as_traffic

        where = f"profile {str(p)!r}: 'traffic'"
        if not isinstance(data["traffic"], Mapping):
            raise RankoptInputError(
                f"{where} must be an object {{'rankopt_traffic': 1, 'n', 'pairs'}}; "
                f"got {data['traffic']!r:.80}."
            )
        traffic = as_traffic(data["traffic"], where=where)
        world = data.get("world_size")
        if isinstance(world, int) and world > 0 and traffic.n != world:
            raise RankoptInputError(
                f"{where} is for {traffic.n} ranks; the profile's world_size is {world}."
            )
    return Profile(
        entries,
        int(data.get("world_size", 0)),
        data.get("engine"),
        str(data.get("source", "mpi")),
        int(data.get("processes", 0)),
        tuple(data.get("command", ())),
        tuple(data.get("notes", ())),
        traffic,
    )


def workload_engine(path: str | os.PathLike[str]) -> str | None:
    """The engine a workload file names (a profile's ``"engine"``), else None.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "w.json"
    >>> _ = p.write_text('{"rankopt_profile": 1, "engine": "openmpi", "workload": []}')
    >>> workload_engine(p)
    'openmpi'
    """
    try:  # a FIFO or device is not read here: the workload reader refuses it by name
        data = json.loads(read_text_file(path, "workload file"))
    except (OSError, ValueError):
        return None
    engine = data.get("engine") if isinstance(data, Mapping) else None
    return str(engine) if engine else None


def _is_mpi_launcher(command: Sequence[str]) -> bool:
    return Path(command[0]).name.startswith(_MPI_LAUNCHERS)


def profile_command(
    command: Sequence[str],
    folder: str | os.PathLike[str],
    *,
    kind: str = "auto",
    shim: str | os.PathLike[str] | None = None,
    mpicc: str | os.PathLike[str] | None = None,
    propagate: str = "auto",
    environ: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Command line and environment that run ``command`` under the recorders.

    Parameters
    ----------
    command : sequence of str
        The launch command (``mpiexec -n 8 ./app``, ``torchrun ... train.py``).
    folder : str or path-like
        Where the processes write their files (created); the torch hook's
        ``sitecustomize.py`` goes into its ``site`` subfolder.
    kind : {"auto", "mpi", "torch"}
        ``"mpi"`` preloads the shim (built with ``mpicc`` unless ``shim`` is
        given) as well as the torch hook; ``"torch"`` the hook only;
        ``"auto"`` is ``"mpi"`` for an MPI launcher (``mpiexec``, ``mpirun``,
        ``srun``, ...) and ``"torch"`` otherwise.
    shim, mpicc
        See :func:`rankopt.adapters.shim.build`.
    propagate : {"auto", "x", "env"}
        How the variables reach MPI ranks (:func:`rankopt.adapters.shim.launch_command`).
    environ : mapping, optional
        The environment to extend; ``os.environ`` by default.

    Returns
    -------
    argv : list of str
    env : dict

    Examples
    --------
    >>> import tempfile
    >>> argv, env = profile_command(["python", "train.py"], tempfile.mkdtemp(), environ={})
    >>> argv, sorted(env)
    (['python', 'train.py'], ['PYTHONPATH', 'RANKOPT_PROFILE'])
    """
    if not command:
        raise RankoptInputError("no command given: rankopt profile -- mpiexec -n N ./app")
    if kind not in ("auto", "mpi", "torch"):
        raise RankoptInputError(f"`kind` must be 'auto', 'mpi' or 'torch'; got {kind!r}.")
    env = dict(os.environ if environ is None else environ)
    out = Path(folder).absolute()
    site = out / "site"
    site.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(HOOK_SOURCE, site / "sitecustomize.py")
    pythonpath = os.fspath(site) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    extra = {"RANKOPT_PROFILE": os.fspath(out), "PYTHONPATH": pythonpath}
    if kind == "auto":
        kind = "mpi" if _is_mpi_launcher(command) else "torch"
    if kind == "torch":
        env.update(extra)
        return list(command), env
    from rankopt.adapters import shim as _shim

    lib = Path(shim) if shim is not None else _shim.build(mpicc=mpicc)
    return _shim.launch_command(
        command, None, shim=lib, propagate=propagate, environ=env, extra=extra
    )


def run_profile(
    command: Sequence[str],
    output: str | os.PathLike[str] | None = None,
    *,
    kind: str = "auto",
    shim: str | os.PathLike[str] | None = None,
    mpicc: str | os.PathLike[str] | None = None,
    keep: str | os.PathLike[str] | None = None,
) -> tuple[int, Profile | None]:
    """Run ``command`` under the recorders, merge the files, write the profile.

    Parameters
    ----------
    command : sequence of str
        The launch command.
    output : str or path-like, optional
        The profile (JSON) to write.
    kind, shim, mpicc
        See :func:`profile_command`.
    keep : str or path-like, optional
        Let the processes write here and keep their files (default: a
        temporary folder, removed).

    Returns
    -------
    status : int
        The command's exit status.
    profile : Profile or None
        None when the command failed and left no files.
    """
    from rankopt._files import check_writable

    if output is not None:  # a bad target fails before the program runs, not after it
        check_writable(output, what="profile")
    if keep is not None and Path(keep).exists() and not Path(keep).is_dir():
        raise RankoptInputError(f"`keep` {os.fspath(keep)!r} is not a directory.")
    if keep is not None:  # a folder to make: under a file, it cannot be
        above = next(q for q in Path(keep).absolute().parents if q.exists())
        if not above.is_dir():
            raise RankoptInputError(
                f"`keep` {os.fspath(keep)!r}: {str(above)!r} is not a directory."
            )
    tmp = None
    folder = Path(keep) if keep is not None else None
    if folder is None:
        tmp = tempfile.TemporaryDirectory(prefix="rankopt-profile-")
        folder = Path(tmp.name)
    try:
        argv, env = profile_command(command, folder, kind=kind, shim=shim, mpicc=mpicc)
        status = subprocess.call(argv, env=env)
        try:
            prof = read_rank_files(folder, command=command)
        except RankoptInputError:
            if status != 0:
                return status, None
            raise
        if output is not None:
            write_profile(output, prof)
        return status, prof
    finally:
        if tmp is not None:
            tmp.cleanup()
