"""Reorder unmodified compiled MPI programs with a PMPI shim loaded by ``LD_PRELOAD``.

The shim (``librankopt_shim.so``) wraps the MPI calls that take a communicator.
At ``MPI_Init`` / ``MPI_Init_thread`` it reads the order named by
``RANKOPT_ORDER``, checks it, and builds the reordered communicator
``PMPI_Comm_split(MPI_COMM_WORLD, 0, rank_of[rank])``; from then on every
``MPI_COMM_WORLD`` argument is replaced by that communicator. The program is
neither changed nor rebuilt: ``MPI_Comm_rank(MPI_COMM_WORLD, ...)`` returns the
new rank, and point-to-point partners and collectives follow the new order.

Contents
--------
- :func:`build` -- compile the shim with the MPI's compiler wrapper (cached).
- :func:`find_mpicc`, :func:`cache_dir` -- where the compiler and the cache are.
- :func:`launch_command`, :func:`run_mpi` -- run ``mpiexec ... ./app`` under the shim.
- :func:`order_text_file` -- an order in the text form the shim reads.

Notes
-----
**Where the order comes from.** The order is read from a file written by
``rankopt solve --order-out`` (integers separated by white space, entry ``k`` the
original rank of the process that gets new rank ``k``; ``#`` starts a comment).
Measuring and solving inside ``MPI_Init`` in C was considered and not done: the
probe and the solvers live in Python, where they are tested against their
references, and a second C implementation would drift from them; a file also
makes the run reproducible and inspectable. Run ``rankopt probe`` and
``rankopt solve`` first (one short job), then launch the program under the shim.
Without ``RANKOPT_ORDER`` the shim changes nothing.

**Failure.** Rank 0 reads and validates the file (integers, as many as
``MPI_COMM_WORLD`` has ranks, a permutation; it must be readable on rank 0's
node) and shares the verdict. If the
file is unreadable or wrong, rank 0 prints one line starting ``rankopt shim:``,
every rank calls ``MPI_Finalize`` and exits with status 1, before the program
runs past ``MPI_Init``. The environment must be the same on all ranks.

**Plain launcher form.** With Open MPI::

    mpiexec -n 8 -x LD_PRELOAD=$(rankopt shim build) -x RANKOPT_ORDER=$PWD/order.txt ./app

With launchers that pass their environment on (MPICH's Hydra, Slurm's srun)::

    LD_PRELOAD=... RANKOPT_ORDER=... srun -n 8 ./app

(the launcher itself then loads the shim too; it does nothing there).

**Cache.** Libraries are cached in ``$RANKOPT_CACHE_DIR/shim``, else
``$XDG_CACHE_HOME/rankopt/shim``, else ``~/.cache/rankopt/shim``, one folder
per MPI library and version plus a hash of the MPI header, the shim sources and
the compiler (``openmpi-5.0.11-1a2b3c4d5e6f/``), holding the library, the
generated ``wrappers.c`` and ``build.json``. The path must be visible on every
node. ``build(outdir=...)`` writes elsewhere.

A cached library is loaded into every rank of a job, so it is reused only
from folders nobody else can change: the library and its folder must belong
to the current user and not be writable by group or others, nor may the
``shim`` folder, and the cache root must belong to the user or to root
(writable by others only with the sticky bit, as ``/tmp``). Otherwise
:func:`build` raises :class:`ShimBuildError` naming the path, instead of
loading or writing there. The folders rankopt creates are ``0o755`` less the
umask.

**Caveats.**

- ``MPI_COMM_WORLD`` is recognised by handle: a communicator equal to it is
  replaced, so a copy in a variable works, but the reordered handle that MPI
  passes to an error-handler callback is not ``MPI_COMM_WORLD``.
- Groups: ``MPI_Comm_group(MPI_COMM_WORLD)`` is the reordered group, and so are
  groups of windows and files opened on ``MPI_COMM_WORLD``; group rank
  translations are consistent with the new ranks. Rank numbers from outside MPI
  (``OMPI_COMM_WORLD_RANK``, ``PMI_RANK``, ``SLURM_PROCID``, log file names chosen
  by them) are the launch ranks and are not changed.
- Attributes: predefined ones (``MPI_TAG_UB``, ...) exist only on the real
  ``MPI_COMM_WORLD``; the shim reads them from there when the reordered
  communicator (or one derived from it) lacks them. ``MPI_Comm_get_name`` still
  says ``MPI_COMM_WORLD``. ``MPI_Abort`` is not redirected (it ends the job either
  way).
- Fortran: ``MPI_Comm_c2f(MPI_COMM_WORLD)`` gives the Fortran handle of the
  reordered communicator and ``MPI_Comm_f2c`` maps it back, so handles passed
  between C and Fortran agree. Calls made from Fortran are redirected only when
  the library's Fortran bindings call the C ``MPI_`` entry points (then the
  Fortran ``MPI_COMM_WORLD`` arrives as the C handle and is replaced); bindings
  that call ``PMPI_`` directly bypass the shim. Not tested here.
- Not covered: statically linked MPI (``LD_PRELOAD`` cannot interpose), calls
  a program makes to ``PMPI_`` functions itself, MPI Sessions
  (``MPI_Comm_create_from_group`` builds its own world), non-Linux systems.
- The wrapped functions are listed in ``rankopt/adapters/_shim_src/wrappers.tbl``; the
  wrapper code is generated from that table and the MPI's own ``mpi.h`` (the
  MPI-4 large-count ``_c`` twins are wrapped where the library declares them).
  mpi4py programs run under the shim unchanged as well.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from rankopt._files import atomic_write_bytes
from rankopt._validation import RankoptInputError
from rankopt.adapters._shim_src import generate as _gen
from rankopt.errors import ShimBuildError

__all__ = [
    "LIBRARY_NAME",
    "ShimBuildError",
    "build",
    "cache_dir",
    "find_mpicc",
    "launch_command",
    "order_text_file",
    "run_mpi",
    "split_launch",
]

log = logging.getLogger("rankopt")

LIBRARY_NAME = "librankopt_shim.so"
SOURCE_DIR = Path(_gen.__file__).parent
_SOURCES = (
    "rankopt_shim.h",
    "shim_core.c",
    "shim_profile.c",
    "shim_traffic.c",
    "wrappers.tbl",
    "generate.py",
    "mpi_version.c",
)
_OPEN_MPI_LAUNCHERS = ("mpiexec", "mpirun", "orterun", "prterun", "oshrun")


def cache_dir() -> Path:
    """Folder where built shims are cached.

    ``$RANKOPT_CACHE_DIR/shim``, else ``$XDG_CACHE_HOME/rankopt/shim``, else
    ``~/.cache/rankopt/shim``.

    Examples
    --------
    >>> cache_dir().name
    'shim'
    """
    root = os.environ.get("RANKOPT_CACHE_DIR")
    if root:
        return Path(root).expanduser() / "shim"
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "rankopt" / "shim"


def _untrusted(path: Path, *, file: bool = False, root: bool = False) -> str:
    """Why ``path`` cannot be trusted to hold the shim ("" when it can)."""
    try:
        st = os.lstat(path) if file else os.stat(path)
    except FileNotFoundError:
        return ""
    uid = os.getuid()
    if file and not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    if not file and not stat.S_ISDIR(st.st_mode):
        return "is not a directory"
    if st.st_uid != uid and not (root and st.st_uid == 0):
        return f"belongs to uid {st.st_uid}, not to you (uid {uid})"
    if st.st_mode & 0o022 and not (root and st.st_mode & stat.S_ISVTX):
        return f"is writable by group or others (mode {stat.S_IMODE(st.st_mode):o})"
    return ""


def _check_cache(target_dir: Path) -> None:
    """Refuse a cache folder (and library) that someone else could have written."""
    shim_dir = target_dir.parent
    for path, kw in (
        (shim_dir.parent, {"root": True}),
        (shim_dir, {}),
        (target_dir, {}),
        (target_dir / LIBRARY_NAME, {"file": True}),
    ):
        why = _untrusted(path, **kw)
        if why:
            raise ShimBuildError(
                f"shim cache {os.fspath(path)!r} {why}; rankopt will not load or build a shim "
                "there. Remove it, fix its owner and mode (chmod go-w), or set "
                "RANKOPT_CACHE_DIR to a folder of your own."
            )


def _make_dirs(target_dir: Path) -> None:
    """Create the cache folders, those rankopt owns without group/other write."""
    target_dir.parent.parent.mkdir(parents=True, exist_ok=True)
    for d in (target_dir.parent, target_dir):
        d.mkdir(mode=0o755, exist_ok=True)


def find_mpicc(mpicc: str | os.PathLike[str] | None = None) -> Path:
    """Locate the MPI C compiler wrapper.

    Parameters
    ----------
    mpicc : str or path-like, optional
        Use this one (a path or a name on ``PATH``). Otherwise try ``$MPICC``,
        ``mpicc`` on ``PATH``, ``mpicc`` next to ``mpiexec`` and next to the
        running Python (where the ``openmpi`` wheel puts it).

    Returns
    -------
    Path
        Absolute path of the compiler wrapper.

    Raises
    ------
    ShimBuildError
        If none is found; the message lists what was tried.

    Examples
    --------
    >>> find_mpicc("/no/such/mpicc")
    Traceback (most recent call last):
    ...
    rankopt.errors.ShimBuildError: MPI compiler wrapper '/no/such/mpicc' not found.
    """
    if mpicc is not None:
        found = shutil.which(os.fspath(mpicc))
        if found is None:
            raise ShimBuildError(f"MPI compiler wrapper {os.fspath(mpicc)!r} not found.")
        return Path(found).absolute()
    tried = []
    candidates: list[str] = []
    if os.environ.get("MPICC"):
        candidates.append(os.environ["MPICC"])
        tried.append(f"$MPICC={os.environ['MPICC']}")
    candidates.append("mpicc")
    tried.append("mpicc on PATH")
    mpiexec = shutil.which("mpiexec")
    if mpiexec is not None:
        candidates.append(str(Path(mpiexec).resolve().parent / "mpicc"))
        tried.append("next to mpiexec")
    candidates.append(str(Path(sys.executable).parent / "mpicc"))
    tried.append(f"{Path(sys.executable).parent}")
    for cand in candidates:
        found = shutil.which(cand)
        if found is not None:
            return Path(found).absolute()
    raise ShimBuildError(
        "No MPI C compiler wrapper (mpicc) found; tried "
        + ", ".join(tried)
        + ". Install an MPI with its compiler wrappers (for example `pip install openmpi`) "
        "or pass its path with --mpicc / mpicc=."
    )


def _run(cmd: Sequence[str], cwd: Path, what: str) -> str:
    proc = subprocess.run(list(cmd), cwd=cwd, capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        default = lines[-1] if lines else "no output"
        last = next((ln for ln in reversed(lines) if "error" in ln.lower()), default)
        raise ShimBuildError(
            f"{what} failed (exit {proc.returncode}): {last.strip()}\n"
            f"command: {' '.join(cmd)}\n" + "\n".join(lines[-20:])
        )
    return proc.stdout


def _inspect_mpi(mpicc: Path, work: Path) -> tuple[str, str, str]:
    """Preprocess ``mpi.h``: (header text, library label, cache key)."""
    probe = str(SOURCE_DIR / "mpi_version.c")
    text = _run([str(mpicc), "-E", "-P", probe], work, f"preprocessing mpi.h with {mpicc}")
    m = re.search(r"^rankopt_mpi_library\s+\"([^\"]*)\"\s*(.*)$", text, re.M)
    if m is None:
        raise ShimBuildError(f"{mpicc} -E did not expand the MPI version macros.")
    version = ".".join(re.findall(r"[\w.]+", m[2].replace('"', " ")))
    label = f"{m[1]} {version}".strip()
    h = hashlib.sha256(text.encode())
    h.update(os.fsencode(mpicc.resolve()))
    for name in _SOURCES:
        h.update((SOURCE_DIR / name).read_bytes())
    slug = re.sub(r"[^a-z0-9.]+", "", m[1].lower()) + (f"-{version}" if version else "")
    return text, label, f"{slug}-{h.hexdigest()[:12]}"


def build(
    *,
    mpicc: str | os.PathLike[str] | None = None,
    outdir: str | os.PathLike[str] | None = None,
    force: bool = False,
    say: Callable[[str], Any] | None = None,
) -> Path:
    """Build ``librankopt_shim.so`` against the MPI of ``mpicc``.

    Parameters
    ----------
    mpicc : str or path-like, optional
        MPI C compiler wrapper; see :func:`find_mpicc`.
    outdir : str or path-like, optional
        Write the library here (always rebuilt). By default it goes to
        :func:`cache_dir`, in a folder named after the MPI library, its version
        and a hash of its header and the shim sources, and is reused.
    force : bool
        Rebuild a cached library.
    say : callable, optional
        Told, as one line each, when a build starts and ends (a build takes
        seconds; a cached library says nothing).

    Returns
    -------
    Path
        The shared library, to put in ``LD_PRELOAD``.

    Raises
    ------
    ShimBuildError
        No compiler wrapper, a non-Linux system, or a failed compile (the
        compiler's last messages are in the error).

    Examples
    --------
    >>> lib = build()  # doctest: +SKIP
    >>> lib.name  # doctest: +SKIP
    'librankopt_shim.so'
    """
    if not sys.platform.startswith("linux"):
        raise ShimBuildError(f"the LD_PRELOAD shim needs Linux; this is {sys.platform}.")
    cc = find_mpicc(mpicc)
    with tempfile.TemporaryDirectory(prefix="rankopt-shim-") as tmp:
        work = Path(tmp)
        header, label, key = _inspect_mpi(cc, work)
        target_dir = cache_dir() / key if outdir is None else Path(outdir)
        target = target_dir / LIBRARY_NAME
        if outdir is None:
            _check_cache(target_dir)
            if target.is_file() and not force:
                why = library_problem(target)
                if not why:
                    log.debug("using cached shim %s", target)
                    return target
                log.warning("the cached shim %s %s; building it again", target, why)
        try:
            gen = _gen.generate(header, source=label)
        except _gen.TableError as exc:
            raise ShimBuildError(f"cannot generate the wrappers for {label}: {exc}") from exc
        (work / "wrappers.c").write_text(gen.code)
        lib = work / LIBRARY_NAME
        cmd = [
            str(cc),
            "-shared",
            "-fPIC",
            "-O2",
            "-fvisibility=hidden",
            "-Wno-deprecated-declarations",
            f"-I{SOURCE_DIR}",
            "-o",
            str(lib),
            str(SOURCE_DIR / "shim_core.c"),
            str(SOURCE_DIR / "shim_profile.c"),
            str(SOURCE_DIR / "shim_traffic.c"),
            "wrappers.c",
            "-Wl,--no-undefined",
        ]
        log.info("building the rankopt shim for %s: %d wrappers", label, len(gen.wrapped))
        t0 = time.monotonic()
        if say is not None:
            say(f"building the shim for {label} ({len(gen.wrapped)} wrappers; once, then cached)")
        _run(cmd, work, f"compiling the shim with {cc}")
        if say is not None:
            say(f"built the shim in {time.monotonic() - t0:.1f} s: {target}")
        info = {
            "mpi": label,
            "mpicc": str(cc),
            "command": cmd,
            "wrapped": list(gen.wrapped),
            "not_declared": list(gen.skipped),
            "sha256": hashlib.sha256(lib.read_bytes()).hexdigest(),
        }
        if outdir is None:
            _make_dirs(target_dir)
            _check_cache(target_dir)
        else:
            target_dir.mkdir(parents=True, exist_ok=True)
        (work / "build.json").write_text(json.dumps(info, indent=1) + "\n")
        for name in ("wrappers.c", LIBRARY_NAME, "build.json"):  # the record last
            # atomic: a concurrent build or a running job never sees half a file
            data = (work / name).read_bytes()
            mode = 0o755 if name == LIBRARY_NAME else 0o644  # never group/other-writable
            atomic_write_bytes(target_dir / name, data, what="shim file", mode=mode)
    return target


#: Bytes every build of the shim holds (the names of the variables it reads).
_MARKERS = (b"RANKOPT_ORDER", b"RANKOPT_SHIM_CONFIRM")


def library_problem(lib: str | os.PathLike[str]) -> str:
    """Why ``lib`` is not a whole rankopt shim ("" when it is one).

    Checked before it is preloaded: a regular file; a whole ELF shared
    object (its section table inside the file: a truncated copy would kill
    the ranks with SIGBUS); rankopt's shim (it holds the names of the
    variables the shim reads, which a foreign library does not); and, when
    a ``build.json`` lies beside it, the SHA-256 recorded at build time.
    """
    p = Path(lib)
    try:
        st = os.stat(p)
    except OSError as exc:
        return f"cannot be read ({exc.strerror})"
    if not stat.S_ISREG(st.st_mode):
        return "is not a regular file"
    data = p.read_bytes()
    if len(data) < 64 or data[:4] != b"\x7fELF" or data[4] not in (1, 2) or data[5] not in (1, 2):
        return "is not an ELF shared library"
    order: Literal["little", "big"] = "little" if data[5] == 1 else "big"
    if data[4] == 2:  # 64-bit header: e_shoff at 40, e_shentsize at 58, e_shnum at 60
        shoff = int.from_bytes(data[40:48], order)
        entsize, num = int.from_bytes(data[58:60], order), int.from_bytes(data[60:62], order)
    else:
        shoff = int.from_bytes(data[32:36], order)
        entsize, num = int.from_bytes(data[46:48], order), int.from_bytes(data[48:50], order)
    if int.from_bytes(data[16:18], order) != 3:  # e_type ET_DYN
        return "is not a shared library (ELF type is not ET_DYN)"
    if shoff + entsize * num > len(data):
        return f"is truncated ({len(data):,} bytes; its section table ends at {shoff + entsize * num:,})"
    if not all(m in data for m in _MARKERS):
        return "is not the rankopt shim (a shared library of another program, or an older build)"
    record = p.parent / "build.json"
    if record.is_file():
        try:
            want = json.loads(record.read_text()).get("sha256")
        except (OSError, ValueError, AttributeError):
            want = None
        if want and hashlib.sha256(data).hexdigest() != want:
            return "differs from the library that was built (its SHA-256 is not the one recorded)"
    return ""


def check_library(lib: str | os.PathLike[str]) -> Path:
    """``lib`` if it is a whole rankopt shim (:func:`library_problem`), else an error.

    Raises
    ------
    RankoptInputError
        Naming the library and what is wrong with it.
    """
    why = library_problem(lib)
    if why:
        raise RankoptInputError(f"shim library {os.fspath(lib)!r} {why}.")
    return Path(lib)


def order_text_file(order: str | os.PathLike[str], n: int | None = None) -> Path:
    """Return a text file with ``order`` in the form the shim reads.

    Parameters
    ----------
    order : str or path-like
        An order file: text (returned as is, after checking), ``.npy`` or
        ``.json`` (converted into a text file in the cache folder).
    n : int, optional
        Number of ranks the order must have.

    Returns
    -------
    Path
        Absolute path of a text order file.

    Raises
    ------
    rankopt.RankoptInputError
        If the file is missing, unreadable, not a permutation, or not of length ``n``.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "order.txt"
    >>> _ = p.write_text("2\\n0\\n1\\n")
    >>> order_text_file(p, 3) == p.resolve()
    True
    """
    from rankopt._files import atomic_write_text
    from rankopt.adapters._common import load_order, order_digest

    path = Path(order).expanduser().resolve()
    arr = load_order(path)
    if n is not None and len(arr) != n:
        raise RankoptInputError(
            f"order file {str(path)!r} has {len(arr)} entries, but the job has {n} ranks."
        )
    if path.suffix in (".npy", ".json"):
        text = "\n".join(str(int(r)) for r in arr) + "\n"
        path = cache_dir().parent / "orders" / f"order-{len(arr)}-{order_digest(arr)}.txt"
        if not path.is_file():
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, text, what="order file")
    return path


def _launcher_ranks(command: Sequence[str]) -> int | None:
    """The ``-n N`` / ``-np N`` of an mpiexec-like command line, if given plainly."""
    for i, arg in enumerate(command[1:-1], start=1):
        if arg in ("-n", "-np", "--np", "-c", "--n") and command[i + 1].isdigit():
            return int(command[i + 1])
    return None


#: Launcher options that take values (how many); any other option is a flag,
#: and ``--opt=value`` is one word. Open MPI 5's ``mpirun``/``mpiexec``/``prterun``
#: (PRRTE's ``--help``), MPICH's Hydra ``mpiexec -h`` and Slurm's ``srun`` (its
#: short options; its long ones are written ``--opt=value``) share no spelling
#: with different arities, so one table serves them all.
_VALUE_OPTIONS: dict[str, int] = {
    **dict.fromkeys(
        # Open MPI / PRRTE
        "-n -np --np --n -c -N -H --host --hostfile -hostfile --machinefile -machinefile "
        "--default-hostfile -x --map-by --rank-by --bind-to --output --wdir -wdir --wd "
        "--prefix --path --preload-files --personality --timeout --display --launch-agent "
        "--rankfile --npernode --npersocket --cpu-set --stdin --runtime-options --app "
        "--tune --pset --report-state-on-timeout "
        # MPICH Hydra
        "-f -hosts -host -ppn -genvlist -envlist -configfile -launcher -bootstrap -binding "
        "-map-by -iface -rmk -demux -errfile-pattern -outfile-pattern -launcher-exec "
        "-bootstrap-exec -prepend-pattern -gpus-per-proc -bind-to "
        # Slurm srun
        "-p -t -w -m -o -e -i -J -A -q -D -d -C -G -B -r -T -W -S -L".split(),
        1,
    ),
    **dict.fromkeys("--mca -mca --gmca -gmca --prtemca --pmixmca -genv -env".split(), 2),
}


def split_launch(command: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(launcher and its options, program and its arguments)`` of a launch command.

    The program starts at the first word that is neither an option of the
    launcher nor an option's value (:data:`_VALUE_OPTIONS`: Open MPI's
    ``mpirun``/``mpiexec``/``prterun``, MPICH's Hydra ``mpiexec``, Slurm's
    ``srun``, whose long options are written ``--opt=value``). An option not
    in the table is read as a flag.

    Examples
    --------
    >>> split_launch(["mpiexec", "--mca", "btl", "self,tcp", "-n", "4", "./app", "-n", "2"])
    (['mpiexec', '--mca', 'btl', 'self,tcp', '-n', '4'], ['./app', '-n', '2'])
    >>> split_launch(["srun", "-N", "2", "--ntasks-per-node=4", "python", "t.py"])
    (['srun', '-N', '2', '--ntasks-per-node=4'], ['python', 't.py'])

    Raises
    ------
    RankoptInputError
        When no program follows the launcher's options.
    """
    takes = _VALUE_OPTIONS
    i = 1
    while i < len(command):
        word = command[i]
        if not word.startswith("-") or word == "-":
            return list(command[:i]), list(command[i:])
        i += 1 + (0 if "=" in word else takes.get(word, 0))
    raise RankoptInputError(
        f"no program after the launcher's options in the launch command {list(command)!r}."
    )


def _is_open_mpi(launcher: str) -> bool:
    name = Path(launcher).name
    if not name.startswith(_OPEN_MPI_LAUNCHERS):
        return False
    try:
        out = subprocess.run([launcher, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "Open MPI" in out.stdout + out.stderr or "OpenRTE" in out.stdout + out.stderr


def launch_command(
    command: Sequence[str],
    order: str | os.PathLike[str] | None = None,
    *,
    shim: str | os.PathLike[str],
    propagate: str = "auto",
    verbose: bool = False,
    environ: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> tuple[list[str], dict[str, str]]:
    """Command line and environment that run ``command`` under the shim.

    Parameters
    ----------
    command : sequence of str
        The launch command, e.g. ``["mpiexec", "-n", "4", "./app"]``.
    order : str or path-like, optional
        Text order file (see :func:`order_text_file`); without it the shim
        leaves ``MPI_COMM_WORLD`` unchanged.
    shim : str or path-like
        The library from :func:`build`.
    propagate : {"auto", "x", "env"}
        How the variables reach the ranks: ``"x"`` adds Open MPI's
        ``-x NAME=VALUE`` options after the launcher, ``"env"`` sets them in the
        launcher's environment, ``"auto"`` picks ``"x"`` for Open MPI's
        ``mpiexec``/``mpirun`` and ``"env"`` otherwise.
    verbose : bool
        Set ``RANKOPT_SHIM_VERBOSE=1`` (rank 0 reports what the shim did).
    environ : mapping, optional
        The environment to extend; ``os.environ`` by default.
    extra : mapping, optional
        More variables for the ranks, passed the same way (``rankopt
        profile``'s ``RANKOPT_PROFILE`` and ``PYTHONPATH``).

    Returns
    -------
    argv : list of str
        The command to run.
    env : dict
        The full environment for it.

    Examples
    --------
    >>> argv, env = launch_command(["mpiexec", "-n", "2", "./app"], "/tmp/o.txt",
    ...                            shim="/lib/librankopt_shim.so", propagate="x", environ={})
    >>> argv
    ['mpiexec', '-x', 'LD_PRELOAD=/lib/librankopt_shim.so', '-x', 'RANKOPT_ORDER=/tmp/o.txt', \
'-n', '2', './app']
    """
    if not command:
        raise RankoptInputError(
            "`command` is empty; expected a launch command such as mpiexec -n 4 ./app."
        )
    if propagate not in ("auto", "x", "env"):
        raise RankoptInputError(
            f"`propagate` must be 'auto', 'x' or 'env'; got {propagate!r} instead."
        )
    env = dict(os.environ if environ is None else environ)
    preload = os.fspath(Path(shim).absolute())
    if env.get("LD_PRELOAD"):
        preload = f"{preload}:{env['LD_PRELOAD']}"
    add = {"LD_PRELOAD": preload}
    if order is not None:
        add["RANKOPT_ORDER"] = os.fspath(Path(order).absolute())
    if verbose:
        add["RANKOPT_SHIM_VERBOSE"] = "1"
    add.update(extra or {})
    if propagate == "auto":
        propagate = "x" if _is_open_mpi(command[0]) else "env"
    if propagate == "env":
        env.update(add)
        if order is None:
            env.pop("RANKOPT_ORDER", None)
        return list(command), env
    flags = [f for k, v in add.items() for f in ("-x", f"{k}={v}")]
    if order is None:
        env.pop("RANKOPT_ORDER", None)
    return [command[0], *flags, *command[1:]], env


def run_mpi(
    command: Sequence[str],
    order: str | os.PathLike[str] | None = None,
    *,
    shim: str | os.PathLike[str] | None = None,
    mpicc: str | os.PathLike[str] | None = None,
    propagate: str = "auto",
    verbose: bool = False,
) -> int:
    """Run an unmodified MPI program with its ranks in ``order``.

    Builds (or reuses) the shim, checks the order against the ``-n`` of the
    command when it has one, and runs the command; the program's output goes
    where this process's output goes.

    Parameters
    ----------
    command : sequence of str
        ``["mpiexec", "-n", "4", "./app", ...]``.
    order : str or path-like, optional
        Order file (text, ``.npy`` or ``.json``).
    shim : str or path-like, optional
        A built library; by default :func:`build` (cached).
    mpicc : str or path-like, optional
        Compiler wrapper for :func:`build`.
    propagate, verbose
        See :func:`launch_command`.

    Returns
    -------
    int
        The exit status of the command.

    Examples
    --------
    >>> run_mpi(["mpiexec", "-n", "4", "./app"], "order.txt")  # doctest: +SKIP
    0
    """
    lib = Path(shim) if shim is not None else build(mpicc=mpicc)
    if not lib.exists():  # a folder or a FIFO is check_library's to name
        raise FileNotFoundError(f"shim library {os.fspath(lib)!r} does not exist.")
    check_library(lib)
    ranks = _launcher_ranks(command)
    path = None if order is None else order_text_file(order, ranks)
    confirm = _confirm_dir()
    try:
        argv, env = launch_command(
            command,
            path,
            shim=lib,
            propagate=propagate,
            verbose=verbose,
            extra={"RANKOPT_SHIM_CONFIRM": os.fspath(confirm)},
        )
        log.info("running %s", " ".join(argv))
        status = subprocess.call(argv, env=env)
        missing = _unconfirmed(confirm, ranks)
    finally:
        shutil.rmtree(confirm, ignore_errors=True)
    if missing:  # the run failed: it did not run in the order asked for
        log.error("the shim %r %s", os.fspath(lib), missing)
        return status or 1
    return status


def _confirm_dir() -> Path:
    """A fresh folder where every rank's shim leaves a file (``rank.R``) when it loads.

    Under the cache folder, which must be visible on every node (as the shim itself).
    """
    base = cache_dir() / "confirm"
    base.mkdir(parents=True, exist_ok=True, mode=0o700)
    return Path(tempfile.mkdtemp(prefix="run-", dir=base))


def _unconfirmed(folder: Path, ranks: int | None) -> str:
    """What the shim's confirmations lack ("" when every rank confirmed it was loaded)."""
    seen = sorted(int(f.name[5:]) for f in folder.glob("rank.*") if f.name[5:].isdigit())
    if not seen:
        return (
            "was loaded by no rank: the program ran in the launch order. The dynamic loader "
            "ignored LD_PRELOAD (a library it cannot load, a statically linked MPI, or a "
            "launcher that does not pass the environment: try --propagate env or x)."
        )
    if ranks is not None and len(seen) < ranks:
        lost = sorted(set(range(ranks)) - set(seen))
        return (
            f"was loaded by {len(seen)} of {ranks} ranks (not by rank(s) "
            f"{', '.join(map(str, lost[:8]))}{', ...' if len(lost) > 8 else ''}): those ranks "
            "ran in the launch order. Is the shim's path visible on every node?"
        )
    return ""
