"""Safe file access: every file rankopt writes or reads goes through here.

Contents
--------
- :class:`RankoptFileError` -- a file that rankopt refuses to write or read.
- :func:`atomic_write`, :func:`atomic_write_text`, :func:`atomic_write_bytes` --
  write a file atomically without ever replacing what is not a regular file.
- :func:`check_output_path` -- the same check, run before a long computation.
- :func:`open_regular` -- open a regular file for reading (never blocks on a FIFO).
- :func:`load_npy`, :func:`load_npz` -- NumPy files, their sizes checked before loading.
- :func:`check_processes` -- the size guard for a matrix of ``n`` processes.
- :data:`MAX_N`, :data:`MAX_ARRAY_BYTES`, :data:`MAX_TEXT_BYTES` -- the limits.

Notes
-----
**Writing.** The data goes to a hidden temporary file in the target's own
folder (``.NAME.XXXXXXXX.tmp`` from :func:`tempfile.mkstemp`), is flushed and
``fsync``-ed, gets its final mode, and is renamed over the target; on any
error, ``KeyboardInterrupt`` included, the temporary file is removed and the
target is untouched. What exists at the target decides what happens:

- nothing, or a regular file: replaced atomically. A new file gets mode
  ``0o666 & ~umask``; a file that is replaced keeps its permission bits.
- a character device named directly (``/dev/null``, a terminal): written in
  place, without truncation, creation or rename -- nothing can replace a
  device node by a regular file. Not atomic, by nature.
- a symbolic link (``/dev/stdout`` included): refused; rankopt never writes
  through a link it did not create, since the link may have been planted.
  Give the file's own path.
- a FIFO, socket, block device or directory: refused.

**Reading.** Files are opened with ``O_NONBLOCK`` and checked with ``fstat``
before the first read, so a FIFO is refused instead of blocking forever.
Sizes are checked before anything is allocated: a text file (CSV, JSON,
order) may hold at most :data:`MAX_TEXT_BYTES`, one array of a ``.npy`` or
``.npz`` at most :data:`MAX_ARRAY_BYTES` (its size is read from the array's
header, not trusted from the zip directory), and a matrix at most
:data:`MAX_N` processes.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
import struct
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import IO, Any

import numpy as np
from numpy.typing import NDArray

from rankopt._limits import (
    MAX_ARRAY_BYTES,
    MAX_N,
    MAX_NPZ_BYTES,
    MAX_NPZ_MEMBERS,
    MAX_TEXT_BYTES,
    RankoptLimitError,
    check_nesting,
)
from rankopt._validation import RankoptInputError
from rankopt.errors import RankoptFileError
from rankopt.units import format_size

__all__ = [
    "MAX_ARRAY_BYTES",
    "MAX_N",
    "MAX_TEXT_BYTES",
    "RankoptFileError",
    "atomic_write",
    "atomic_write_bytes",
    "atomic_write_text",
    "check_output_path",
    "check_writable",
    "check_processes",
    "file_kind",
    "load_npy",
    "load_npz",
    "NpzArrays",
    "open_regular",
]


_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISREG, "a regular file"),
)


def file_kind(mode: int) -> str:
    """Name the kind of file of an ``st_mode``: ``"a FIFO"``, ``"a directory"``, ...

    Examples
    --------
    >>> import stat
    >>> file_kind(stat.S_IFIFO | 0o644)
    'a FIFO'
    """
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _name(what: str, path: str | os.PathLike[str]) -> str:
    return f"{what} {os.fspath(path)!r}"


def _umask() -> int:
    """The process umask, read without changing it where Linux allows."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)  # not thread-safe, hence the /proc read first
    os.umask(mask)
    return mask


def outputs_problem(
    outputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
    inputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
) -> str | None:
    """Why writing ``outputs`` would destroy a file the command reads or another output.

    ``outputs`` are ``(flag, path)`` pairs and ``inputs`` ``(what, path)`` pairs
    (``what`` names the input: ``"--order"``, ``"input matrix"``); a path of
    ``None`` or ``"-"`` (standard output) is skipped. Returns the first problem
    as one line, or ``None``; the caller raises it in its own way.

    Examples
    --------
    >>> from rankopt._files import outputs_problem
    >>> outputs_problem([("--json", "o.json")], [("--order", "o.txt")]) is None
    True
    >>> outputs_problem([("--save", "o.txt")], [("--order", "./o.txt")])
    "--save 'o.txt' is the --order file; give the output another name."
    >>> outputs_problem([("--save", "r.json"), ("--json", "r.json")], [])
    "--json 'r.json' is also the file of --save; give each output its own name."
    """
    taken: dict[str, str] = {}  # the outputs' real paths: one file is not written twice
    for flag, path in outputs:
        if path is None or os.fspath(path) == "-":
            continue
        real = os.path.realpath(path)
        for what, source in inputs:
            if source is not None and _same_path(real, source):
                return (
                    f"{flag} {os.fspath(path)!r} is the {what} file; give the output another name."
                )
        if real in taken:
            return (
                f"{flag} {os.fspath(path)!r} is also the file of {taken[real]}; give each "
                "output its own name."
            )
        taken[real] = flag
    return None


def _same_path(real: str, source: str | os.PathLike[str]) -> bool:
    """Whether the real path ``real`` and ``source`` name one file (a link to it too)."""
    if real == os.path.realpath(source):
        return True
    try:
        return os.path.samefile(real, source)
    except (OSError, ValueError):  # one does not exist (yet), or holds a NUL
        return False


def check_output_path(
    path: str | os.PathLike[str], *, what: str = "output file"
) -> os.stat_result | None:
    """Check that ``path`` may be written by :func:`atomic_write`; return its ``lstat`` or None.

    Call it before a long computation whose result goes to ``path``, so that a
    bad target fails at once rather than after the work.

    Parameters
    ----------
    path : path-like
        The file to be written.
    what : str
        How the error names the path: an option (``"--order-out"``) or a role.

    Returns
    -------
    os.stat_result or None
        The target's ``lstat`` (a regular file or a character device), or None
        if it does not exist yet.

    Raises
    ------
    RankoptFileError
        If the target is a symbolic link, FIFO, socket, block device or
        directory, or its folder does not exist.
    """
    raw = os.fspath(path)
    if raw == "":
        raise RankoptFileError(f"{what} is an empty path; give the name of a file.")
    if raw == "-":  # standard output to the user (as --json - is), not a file named '-'
        raise RankoptFileError(
            f"{what} is '-', which writes no standard output here (--json alone does); give "
            "the name of a file."
        )
    if "\x00" in raw:
        raise RankoptFileError(f"{what} {raw!r} holds a NUL character.")
    p = Path(raw)
    if raw.endswith(os.sep) or (os.altsep and raw.endswith(os.altsep)) or p.name in ("", ".", ".."):
        raise RankoptFileError(
            f"{_name(what, raw)} names a directory (it ends in {raw[-1]!r}); give a file name."
        )
    try:
        st = os.lstat(p)
    except FileNotFoundError:
        st = None
    except NotADirectoryError:
        raise RankoptFileError(f"{_name(what, p)}: {str(p.parent)!r} is not a directory.") from None
    if st is not None:
        if stat.S_ISLNK(st.st_mode):
            raise RankoptFileError(
                f"{_name(what, p)} is a symbolic link; rankopt does not write through links "
                "(give the path of the file itself)."
            )
        if not (stat.S_ISREG(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            raise RankoptFileError(
                f"{_name(what, p)} is {file_kind(st.st_mode)}, not a regular file."
            )
        return st
    parent = p.parent
    if not parent.is_dir():
        raise RankoptFileError(f"{_name(what, p)}: directory {str(parent)!r} does not exist.")
    return None


class Terminated(BaseException):
    """A SIGTERM or SIGHUP received while a file was being written (see :func:`atomic_write`)."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by signal {signum}")
        self.signum = signum


@contextlib.contextmanager
def _termination_raises() -> Iterator[None]:
    """Within the block, SIGTERM and SIGHUP raise :class:`Terminated` (so the cleanup runs).

    Only in the main thread, and only where the signal still has its default
    action (a handler the program installed is left alone). After the block
    the signal is delivered again with its default action, so the process
    ends as it would have.
    """
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved: dict[int, Any] = {}
    got: list[int] = []

    def handler(signum: int, frame: Any) -> None:
        got.append(signum)
        raise Terminated(signum)

    for name in ("SIGTERM", "SIGHUP"):
        sig = getattr(signal, name, None)
        if sig is None:
            continue
        try:
            if signal.getsignal(sig) is signal.SIG_DFL:
                saved[sig] = signal.signal(sig, handler)
        except (ValueError, OSError):  # not the main interpreter
            pass
    try:
        yield
    finally:
        for sig, old in saved.items():
            signal.signal(sig, old)
        if got:  # end as the signal would have, now that nothing is left behind
            os.kill(os.getpid(), got[0])


def check_writable(path: str | os.PathLike[str], *, what: str = "output file") -> None:
    """:func:`check_output_path`, and that this process may create or replace the file.

    For outputs written only after long work (a probe, a solve, the user's
    program): a read-only folder or file fails at once.

    Raises
    ------
    RankoptFileError
        Naming ``what``, the path and why it cannot be written.
    """
    st = check_output_path(path, what=what)
    p = Path(os.fspath(path))
    folder = p.parent if str(p.parent) else Path(".")
    if st is not None and stat.S_ISCHR(st.st_mode):
        if not os.access(p, os.W_OK):
            raise RankoptFileError(f"{_name(what, p)} is not writable.")
        return
    if not os.access(folder, os.W_OK | os.X_OK):
        raise RankoptFileError(f"{_name(what, p)}: directory {str(folder)!r} is not writable.")
    if st is not None and not os.access(p, os.W_OK):
        raise RankoptFileError(f"{_name(what, p)} is not writable.")


def _write_device(
    p: Path, st: os.stat_result, write_fn: Callable[[IO[bytes]], Any], what: str
) -> None:
    """Write in place to the character device ``p`` (no create, no truncate, no link)."""
    flags = os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(p, flags | getattr(os, "O_CLOEXEC", 0))
    try:
        now = os.fstat(fd)
        if not stat.S_ISCHR(now.st_mode) or now.st_rdev != st.st_rdev:
            raise RankoptFileError(f"{_name(what, p)} changed while it was opened.")
        fh = os.fdopen(fd, "wb")
    except BaseException:
        os.close(fd)
        raise
    with fh:
        write_fn(fh)
        fh.flush()


def atomic_write(
    path: str | os.PathLike[str],
    write_fn: Callable[[IO[bytes]], Any],
    *,
    what: str = "output file",
    mode: int | None = None,
) -> Path:
    """Write a file atomically: ``write_fn(fh)`` fills a temporary file renamed over ``path``.

    Parameters
    ----------
    path : path-like
        The file to write.
    write_fn : callable
        Called with a binary file object open for writing; writes the content.
    what : str
        How errors name the path: an option (``"--order-out"``) or a role
        (``"rankfile"``).
    mode : int, optional
        Permission bits of the file, less the umask. By default a new file gets
        ``0o666 & ~umask`` and a replaced file keeps its permission bits.

    Returns
    -------
    pathlib.Path
        ``path``.

    Raises
    ------
    RankoptFileError
        If ``path`` is a symbolic link, FIFO, socket, block device or
        directory, or its folder does not exist; nothing is written then.

    Notes
    -----
    A reader never sees a half-written file, and a failed or interrupted
    write leaves the target as it was and no temporary file behind. A
    character device named directly (``/dev/null``) is written in place. See
    the module notes for the full rules.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "out.bin"
    >>> _ = atomic_write(p, lambda fh: fh.write(b"abc"))
    >>> p.read_bytes()
    b'abc'
    """
    p = Path(os.fspath(path))
    st = check_output_path(p, what=what)
    if st is not None and stat.S_ISCHR(st.st_mode):
        _write_device(p, st, write_fn, what)
        return p
    if mode is not None:
        mode &= ~_umask() & 0o777
    elif st is not None:
        mode = stat.S_IMODE(st.st_mode) & 0o777
    else:
        mode = 0o666 & ~_umask()
    parent = p.parent
    with _termination_raises():
        try:
            fd, tmp = tempfile.mkstemp(dir=parent, prefix=f".{p.name}.", suffix=".tmp")
        except OSError as exc:  # a read-only or full folder: name the target, not the temporary
            raise RankoptFileError(f"cannot write {_name(what, p)}: {exc.strerror}.") from None
        try:
            try:
                with os.fdopen(fd, "wb") as fh:
                    write_fn(fh)
                    fh.flush()
                    os.fchmod(fh.fileno(), mode)
                    os.fsync(fh.fileno())
            except OSError as exc:  # a full disk, a quota: name the file, not the temporary
                if isinstance(exc, RankoptFileError) or exc.errno is None:
                    raise
                raise RankoptFileError(
                    f"cannot write {_name(what, p)}: {exc.strerror or exc}; nothing was written."
                ) from None
            # the target may have changed kind while we wrote: check again just before the rename
            now = check_output_path(p, what=what)
            if now is not None and not stat.S_ISREG(now.st_mode):
                raise RankoptFileError(f"{_name(what, p)} became {file_kind(now.st_mode)}.")
            os.replace(tmp, p)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
    try:  # make the rename durable; not every file system allows fsync on a folder
        dfd = os.open(parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    except OSError:
        return p
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
    return p


def atomic_write_bytes(
    path: str | os.PathLike[str],
    data: bytes,
    *,
    what: str = "output file",
    mode: int | None = None,
) -> Path:
    """Write ``data`` to ``path`` with :func:`atomic_write`."""
    return atomic_write(path, lambda fh: fh.write(data), what=what, mode=mode)


def atomic_write_text(
    path: str | os.PathLike[str], text: str | bytes, *, what: str = "output file"
) -> Path:
    """Write ``text`` (UTF-8; bytes as they are) to ``path`` with :func:`atomic_write`.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "order.txt"
    >>> atomic_write_text(p, "1\\n0\\n").read_text()
    '1\\n0\\n'
    """
    data = text.encode("utf-8") if isinstance(text, str) else text
    return atomic_write_bytes(path, data, what=what)


def read_text_file(path: str | os.PathLike[str], what: str) -> str:
    """The UTF-8 text of a small input file (:func:`open_regular`, at most
    :data:`MAX_TEXT_BYTES`; a leading byte-order mark is dropped); errors name
    ``what`` and the path."""
    p = Path(path)
    try:
        with open_regular(p, what=what, max_bytes=MAX_TEXT_BYTES) as fh:
            raw = fh.read()
    except RankoptFileError:  # names the file and says what is wrong with it
        raise
    except FileNotFoundError as exc:  # open_regular's message names the file
        raise RankoptInputError(f"{exc}") from None
    except OSError as exc:
        raise RankoptInputError(f"cannot read the {what} {str(p)!r} ({exc}).") from None
    try:
        return raw.decode("utf-8-sig")  # a byte-order mark (Windows editors) is dropped
    except UnicodeDecodeError:
        raise RankoptInputError(f"{what} {str(p)!r} is not UTF-8 text.") from None


def parse_json(text: str, where: str) -> Any:
    """``text`` parsed as JSON after :func:`~rankopt._limits.check_nesting`; an error
    names ``where``."""
    import json

    check_nesting(text, where)
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RankoptInputError(f"{where}: invalid JSON ({exc}).") from None


def open_regular(
    path: str | os.PathLike[str], *, what: str = "file", max_bytes: int | None = None
) -> io.BufferedReader:
    """Open a regular file for binary reading; refuse anything else before reading.

    Parameters
    ----------
    path : path-like
        The file. Symbolic links are followed (reading through one is safe).
    what : str
        How errors name the file (``"matrix file"``, ``"--order"``).
    max_bytes : int, optional
        Refuse a larger file.

    Returns
    -------
    io.BufferedReader

    Raises
    ------
    FileNotFoundError
        If ``path`` does not exist.
    RankoptFileError
        If it is a FIFO, device, socket or directory, cannot be opened, or is
        larger than ``max_bytes``.
    """
    p = os.fspath(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(p, flags | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FileNotFoundError(f"{_name(what, p)} does not exist.") from None
    except OSError as exc:
        raise RankoptFileError(f"cannot read {_name(what, p)}: {exc.strerror}.") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise RankoptFileError(
                f"{_name(what, p)} is {file_kind(st.st_mode)}, not a regular file."
            )
        if max_bytes is not None and st.st_size > max_bytes:
            raise RankoptFileError(
                f"{_name(what, p)} is {format_size(st.st_size)}; rankopt reads at most "
                f"{format_size(max_bytes)} from such a file."
            )
        if flags & getattr(os, "O_NONBLOCK", 0):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")  # type: ignore[return-value]
    except BaseException:
        os.close(fd)
        raise


def check_processes(n: int, source: str) -> None:
    """Refuse a matrix of more than :data:`MAX_N` processes, before it is allocated.

    ``source`` names where ``n`` comes from (a file and what in it, or options).

    Raises
    ------
    RankoptInputError
        If ``n > MAX_N``.
    """
    if n > MAX_N:
        raise RankoptLimitError(
            f"{source} gives n={n} processes, over the limit of {MAX_N} "
            f"(an n x n float64 matrix would take {format_size(8.0 * n * n)})."
        )


_NPY_HEADER_MAX = 10_000  # bytes of a .npy header read at most (NumPy's own default limit)


def _array_header(fh: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Shape and dtype from a ``.npy`` header; the stream is left after the header."""
    fmt = np.lib.format
    version = fmt.read_magic(fh)
    if version == (1, 0):
        shape, _, dtype = fmt.read_array_header_1_0(fh)
    elif version == (2, 0):
        shape, _, dtype = fmt.read_array_header_2_0(fh)
    elif version == (3, 0):
        shape, dtype = _header_3_0(fh)
    else:
        raise ValueError(f"unknown .npy format version {version[0]}.{version[1]}")
    return tuple(int(s) for s in shape), dtype


def _header_3_0(fh: IO[bytes]) -> tuple[tuple[int, ...], np.dtype[Any]]:
    """Shape and dtype of a format 3.0 ``.npy`` header (2.0 with a UTF-8 dictionary).

    NumPy reads it only through a private function, whose place changes between
    releases; the layout is public (NEP 1): a little-endian uint32 length, then
    the dictionary as Python literal text.
    """
    import ast

    raw = fh.read(4)
    if len(raw) < 4:
        raise EOFError("the header's length is cut off")
    (length,) = struct.unpack("<I", raw)
    if length > _NPY_HEADER_MAX:
        raise ValueError(f"a header of {length} bytes (at most {_NPY_HEADER_MAX} are read)")
    text = fh.read(length)
    if len(text) < length:
        raise EOFError("the header is cut off")
    try:
        header = ast.literal_eval(text.decode("utf-8"))
    except (UnicodeDecodeError, MemoryError, RecursionError) as exc:
        raise ValueError(f"the header cannot be read: {exc}") from None
    if not isinstance(header, dict) or set(header) != {"descr", "fortran_order", "shape"}:
        raise ValueError(f"the header is not the array dictionary: {text[:80]!r}")
    shape = header["shape"]
    if not isinstance(shape, tuple) or not all(
        isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in shape
    ):
        raise ValueError(f"the header's shape is not a tuple of sizes: {shape!r}")
    try:
        dtype = np.lib.format.descr_to_dtype(header["descr"])
    except (TypeError, ValueError) as exc:
        raise ValueError(f"the header's dtype is not valid: {exc}") from None
    return shape, dtype


def _check_array(
    shape: tuple[int, ...], dtype: np.dtype[Any], stored: int | None, where: str
) -> None:
    if dtype.hasobject:
        raise RankoptFileError(
            f"{where}: not a plain numeric .npy file (it holds Python objects, "
            "which rankopt never unpickles)."
        )
    if len(shape) == 2:
        check_processes(max(shape), where)
    nbytes = int(np.prod(shape, dtype=object)) * dtype.itemsize
    if nbytes > MAX_ARRAY_BYTES:
        raise RankoptFileError(
            f"{where} has shape {shape} and would expand to {format_size(nbytes)}; "
            f"rankopt loads at most {format_size(MAX_ARRAY_BYTES)} per array."
        )
    if stored is not None and nbytes > stored:
        raise RankoptFileError(
            f"{where} is truncated: its header promises {format_size(nbytes)} "
            f"({shape} {dtype}), the file holds {format_size(stored)}."
        )


def load_npy(path: str | os.PathLike[str], *, what: str = "file") -> NDArray[Any]:
    """Load a ``.npy`` array without pickles, its header checked before allocation.

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    RankoptFileError
        If it is not a regular file, not a ``.npy`` file, truncated, holds
        objects, or is larger than :data:`MAX_ARRAY_BYTES` / :data:`MAX_N`.
    """
    where = _name(what, path)
    with open_regular(path, what=what) as fh:
        size = os.fstat(fh.fileno()).st_size
        try:
            shape, dtype = _array_header(fh)
        except (ValueError, EOFError, SyntaxError) as exc:
            raise RankoptFileError(f"{where} is not a valid .npy file ({exc}).") from None
        _check_array(shape, dtype, size - fh.tell(), where)
        fh.seek(0)
        try:
            return np.load(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise RankoptFileError(f"{where} is not a valid .npy file ({exc}).") from None


def _zip_member_count(fh: IO[bytes]) -> int | None:
    """The member count in a zip's end-of-central-directory record, before the directory is read.

    None when the record is not found (the zip reader then reports the file).
    """
    size = fh.seek(0, os.SEEK_END)
    tail_len = min(size, 22 + 0xFFFF)
    fh.seek(size - tail_len)
    tail = fh.read(tail_len)
    pos = tail.rfind(b"PK\x05\x06")
    if pos < 0 or pos + 22 > len(tail):
        return None
    return int.from_bytes(tail[pos + 10 : pos + 12], "little")


def _text_member(arr: NDArray[Any], where: str) -> NDArray[Any]:
    """A string member as text: bytes decoded (UTF-8), and a JSON text's nesting checked."""
    if arr.dtype.kind == "S":
        try:
            arr = np.char.decode(arr, "utf-8")
        except UnicodeDecodeError as exc:
            raise RankoptFileError(
                f"{where} holds bytes that are not UTF-8 text (byte {exc.start})."
            ) from None
    if arr.dtype.kind == "U" and arr.ndim == 0:
        check_nesting(str(arr), where)
    return arr


#: What each array name means in every ``.npz`` rankopt reads (probe measurements,
#: networks, clouds, caches): ``"real"`` numbers, ``"whole"`` numbers, ``"names"``
#: (a 1-D array of text), ``"text"`` (one string) or ``"object"`` (one JSON
#: object as text). Checked from each array's header before anything is read, so
#: a complex, boolean, date or string latency is refused by every reader. Other
#: names are not checked here.
NPZ_SCHEMA: dict[str, str] = {
    "latency": "real",
    "bandwidth": "real",
    "latency_spread": "real",
    "bandwidth_spread": "real",
    "uplinks": "real",
    "uplinks_in": "real",
    "timestamps": "real",
    "groups": "whole",
    "seed": "whole",
    "pair_counts": "whole",
    "bandwidth_counts": "whole",
    "latency_samples": "whole",
    "bandwidth_samples": "whole",
    "hosts": "names",
    "format": "text",
    "source": "text",
    "backend": "text",
    "parameters": "object",
    "provenance": "object",
}

_SCHEMA_KINDS = {
    "real": ("iuf", "real numbers"),
    "whole": ("iu", "whole numbers"),
    "names": ("US", "names (text)"),
    "text": ("US", "text"),
    "object": ("US", "a JSON object (text)"),
}


def _check_member(key: str, shape: tuple[int, ...], dtype: np.dtype[Any], where: str) -> None:
    """Refuse an array whose dtype (or shape, for text) is not what its name means."""
    rule = NPZ_SCHEMA.get(key)
    if rule is None:
        return
    kinds, words = _SCHEMA_KINDS[rule]
    if dtype.kind not in kinds:
        raise RankoptFileError(f"{where} must hold {words}; got dtype {dtype}.")
    if rule in ("text", "object") and shape != ():
        raise RankoptFileError(f"{where} must be one string; got shape {shape}.")
    if rule == "names" and len(shape) != 1:
        raise RankoptFileError(f"{where} must be a 1-D array of names; got shape {shape}.")


def _check_object(arr: NDArray[Any], where: str) -> None:
    """A JSON-object member: nesting checked, then parsed, and it must be an object."""
    import json

    text = str(arr)
    check_nesting(text, where)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise RankoptFileError(f"{where} is not JSON ({exc}).") from None
    if not isinstance(doc, dict):
        raise RankoptFileError(
            f"{where} must be a JSON object; got {type(doc).__name__} {text[:40]!r}."
        )


#: What reading a damaged zip archive may raise (a method or flag it does not know,
#: a bad header: ``NotImplementedError``, ``RuntimeError``, ``struct.error``...).
_ZIP_ERRORS = (
    zipfile.BadZipFile,
    zlib.error,
    ValueError,
    OSError,
    EOFError,
    NotImplementedError,
    RuntimeError,
    struct.error,
    OverflowError,
)


class NpzArrays(Mapping[str, NDArray[Any]]):
    """The arrays of an ``.npz`` archive, each read when first asked for.

    :func:`load_npz` checks every member's header and the archive's totals
    when it is made; a member that is never used is never decompressed. A
    member is read again from the file (and its header checked again) the
    first time it is used.
    """

    def __init__(self, path: str, what: str, sizes: dict[str, tuple[str, int]]) -> None:
        self._path = path
        self._what = what
        self._members = sizes  # name -> (zip member name, stored size)
        self._cache: dict[str, NDArray[Any]] = {}

    def __getitem__(self, key: str) -> NDArray[Any]:
        if key in self._cache:
            return self._cache[key]
        if key not in self._members:
            raise KeyError(key)
        zname, _ = self._members[key]
        where = f"{_name(self._what, self._path)}, array {key!r}"
        with open_regular(self._path, what=self._what) as fh:
            try:
                with zipfile.ZipFile(fh) as zf:
                    info = zf.getinfo(zname)
                    with zf.open(info) as m:
                        shape, dtype = _array_header(m)
                        _check_array(shape, dtype, info.file_size - m.tell(), where)
                    with zf.open(info) as m:
                        arr = np.lib.format.read_array(m, allow_pickle=False)
            except RankoptInputError:
                raise
            except (*_ZIP_ERRORS, KeyError) as exc:
                raise RankoptFileError(
                    f"{where} cannot be read (the file changed or is corrupt: {exc})."
                ) from None
        arr = _text_member(arr, where)
        if NPZ_SCHEMA.get(key) == "object":
            _check_object(arr, where)
        self._cache[key] = arr
        return arr

    def __iter__(self) -> Iterator[str]:
        return iter(self._members)

    def __len__(self) -> int:
        return len(self._members)

    def __contains__(self, key: object) -> bool:
        return key in self._members

    def __repr__(self) -> str:
        return f"NpzArrays({self._path!r}, {sorted(self._members)})"


def load_npz(path: str | os.PathLike[str], *, what: str = "file") -> NpzArrays:
    """The arrays of an ``.npz`` archive, sizes checked before anything is decompressed.

    Returns
    -------
    NpzArrays
        A read-only mapping of array name (without ``.npy``) to array; each
        array is read when first used, so an array the caller never asks for
        is never decompressed. Byte strings come back as text (``str``).

    Raises
    ------
    FileNotFoundError
        If the file does not exist.
    RankoptFileError
        If it is not a regular file, not a zip archive (truncated or corrupt),
        holds more than :data:`MAX_NPZ_MEMBERS` arrays, a member is not a plain
        ``.npy`` array, or would expand past :data:`MAX_ARRAY_BYTES` (or
        :data:`MAX_N` processes), or all of them together past
        :data:`MAX_NPZ_BYTES`; a text member nested deeper than
        :data:`rankopt._limits.MAX_NESTING` is refused when it is read.
    """
    where = _name(what, path)
    sizes: dict[str, tuple[str, int]] = {}
    with open_regular(path, what=what) as fh:
        if fh.read(6) == b"\x93NUMPY":
            raise RankoptFileError(f"{where} is a single .npy array, not an .npz archive.")
        count = _zip_member_count(fh)
        if count is not None and count > MAX_NPZ_MEMBERS:
            raise RankoptFileError(
                f"{where} holds {count:,} arrays; rankopt reads at most {MAX_NPZ_MEMBERS} "
                "from one archive."
            )
        fh.seek(0)
        try:
            with zipfile.ZipFile(fh) as zf:
                infos = [i for i in zf.infolist() if not i.is_dir()]
                if len(infos) > MAX_NPZ_MEMBERS:
                    raise RankoptFileError(
                        f"{where} holds {len(infos):,} arrays; rankopt reads at most "
                        f"{MAX_NPZ_MEMBERS} from one archive."
                    )
                total = 0
                for info in infos:
                    key = info.filename.removesuffix(".npy")
                    member = f"{where}, array {key!r},"
                    if key in sizes:
                        raise RankoptFileError(f"{member} appears twice in the archive.")
                    if info.flag_bits & 0x1:
                        raise RankoptFileError(f"{member} is encrypted.")
                    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
                        raise RankoptFileError(
                            f"{member} is compressed with method {info.compress_type}; .npz "
                            "files are stored or deflated."
                        )
                    if info.file_size > MAX_ARRAY_BYTES + 2**16:
                        raise RankoptFileError(
                            f"{member} would expand to {format_size(info.file_size)}; "
                            f"rankopt loads at most {format_size(MAX_ARRAY_BYTES)} per array."
                        )
                    with zf.open(info) as m:
                        try:
                            shape, dtype = _array_header(m)
                        except (ValueError, EOFError, SyntaxError) as exc:
                            raise RankoptFileError(
                                f"{member} is not a .npy array ({exc})."
                            ) from None
                        _check_array(shape, dtype, info.file_size - m.tell(), member.rstrip(","))
                        _check_member(key, shape, dtype, member.rstrip(","))
                    total += info.file_size
                    if total > MAX_NPZ_BYTES:
                        raise RankoptFileError(
                            f"{where}: its arrays would expand to more than "
                            f"{format_size(total)}; rankopt loads at most "
                            f"{format_size(MAX_NPZ_BYTES)} from one archive."
                        )
                    sizes[key] = (info.filename, info.file_size)
        except RankoptInputError:  # the archive's own problem, already named (a limit, a kind)
            raise
        except _ZIP_ERRORS as exc:
            raise RankoptFileError(
                f"{where} is not a valid .npz archive (truncated or corrupt: {exc})."
            ) from None
    return NpzArrays(os.fspath(path), what, sizes)


def hierarchy_arrays(
    groups: Sequence[NDArray[np.int64]], uplinks: Sequence[NDArray[np.float64]]
) -> dict[str, NDArray[Any]]:
    """``groups`` (levels x n) and ``uplinks`` (levels x groups, NaN-padded) for a file.

    The layout the network and measurement files share; empty levels write
    nothing. Uplinks given per direction (a level of shape ``(2, G)``) write
    the out capacities as ``uplinks`` and the in capacities as ``uplinks_in``
    (a file without ``uplinks_in`` has the same capacity both ways).
    """
    out: dict[str, NDArray[Any]] = {}
    if groups:
        out["groups"] = np.array(groups, dtype=np.int64)
    if uplinks:
        levels = [np.asarray(u, dtype=np.float64) for u in uplinks]
        gmax = max(u.shape[-1] for u in levels)
        pad = np.full((2, len(levels), gmax), np.nan)
        for k, u in enumerate(levels):
            pad[:, k, : u.shape[-1]] = u if u.ndim == 2 else u[None, :]
        out["uplinks"] = pad[0]
        if any(u.ndim == 2 for u in levels):
            out["uplinks_in"] = pad[1]
    return out


def uplinks_from_array(arr: Any, arr_in: Any = None) -> tuple[NDArray[np.float64], ...]:
    """The per-level uplinks of :func:`hierarchy_arrays`'s padded arrays.

    With ``arr_in`` (the file's ``uplinks_in``), levels whose two directions
    differ come back as ``(2, G)`` (out, in) arrays.
    """
    rows = np.atleast_2d(np.asarray(arr, dtype=float))
    if arr_in is None:
        return tuple(row[np.isfinite(row)] for row in rows)
    rows_in = np.atleast_2d(np.asarray(arr_in, dtype=float))
    if rows_in.shape != rows.shape:
        raise RankoptInputError(
            f"`uplinks_in` must have the shape of `uplinks` {rows.shape}; got {rows_in.shape}."
        )
    out = []
    for row, row_in in zip(rows, rows_in, strict=True):
        keep = np.isfinite(row)
        a, b = row[keep], row_in[keep]
        out.append(a if np.array_equal(a, b) else np.stack([a, b]))
    return tuple(out)
