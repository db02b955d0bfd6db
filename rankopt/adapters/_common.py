"""Helpers shared by the adapters: host lists, order digests, order files.

Nothing here imports mpi4py or torch. ``atomic_write_text`` is
:func:`rankopt._files.atomic_write_text`, re-exported for the writers.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from rankopt._files import MAX_TEXT_BYTES, atomic_write, atomic_write_text, load_npy, open_regular
from rankopt._limits import check_nesting, check_probe_settings
from rankopt._validation import RankoptInputError, check_host_names, check_order

__all__ = [
    "as_order",
    "check_hosts",
    "option_digests",
    "node_index",
    "order_digest",
    "atomic_write_text",
    "load_order",
    "save_order",
    "parse_options",
    "OrderFile",
    "read_order_file",
    "check_binding",
    "ORDER_FORMAT",
]

#: The JSON order file that carries the network it was solved on.
ORDER_FORMAT = "rankopt.order/1"


def as_order(order: ArrayLike, n: int | None = None, name: str = "order") -> NDArray[np.int64]:
    """Validate ``order`` as a permutation of ``range(n)`` (``n`` defaults to its length)."""
    if hasattr(order, "order") and not isinstance(order, np.ndarray):
        order = order.order  # a SolveResult
    arr = np.asarray(order)
    return check_order(arr, (arr.shape[0] if arr.ndim else 0) if n is None else n, name)


def check_hosts(hosts: Any, n: int | None = None, name: str = "hosts") -> tuple[str, ...]:
    """Return the host name of every original rank as a tuple of str.

    ``hosts`` is a sequence of names (one per original rank) or an object with a
    ``.hosts`` attribute (a ``Measurement``).
    """
    if hasattr(hosts, "hosts") and not isinstance(hosts, (str, bytes)):
        hosts = hosts.hosts
    if hosts is None:
        raise RankoptInputError(f"`{name}` is None; the measurement carries no host names.")
    return check_host_names(hosts, n, name)


def node_index(labels: Sequence[str]) -> NDArray[np.int64]:
    """Number the distinct labels by first appearance: ``node_index(["b", "a", "b"]) == [0, 1, 0]``.

    The same numbering as :func:`rankopt.probe.hierarchy.host_labels`, which it calls.
    """
    from rankopt.probe.hierarchy import host_labels

    return host_labels(labels)


def order_digest(order: NDArray[np.int64]) -> str:
    """A short digest of an order, used to check that every rank holds the same one."""
    data = np.ascontiguousarray(order, dtype="<i8").tobytes()
    return hashlib.sha256(data).hexdigest()[:16]


def load_order(path: str | os.PathLike[str]) -> NDArray[np.int64]:
    """Read an order from ``.npy``, ``.json`` (a list or ``{"order": [...]}``) or text.

    Examples
    --------
    >>> import tempfile, pathlib
    >>> p = pathlib.Path(tempfile.mkdtemp()) / "order.txt"
    >>> _ = p.write_text("2 0 1\\n")
    >>> load_order(p)
    array([2, 0, 1])
    """

    return read_order_file(path).order


@dataclass(frozen=True)
class OrderFile:
    """An order read from a file and, for a JSON order file, what it was solved on.

    Attributes
    ----------
    order : ndarray of int64
    network : dict or None
        :func:`rankopt.network.network_record` of the network the order was
        solved on (digest, date, n, hosts, hierarchy, matrices); ``None`` for
        files that carry none (``.npy``, text, a bare JSON list).
    solved : dict or None
        What was modelled (collective, objective, nbytes, modelled speedup).
    path : str
    """

    order: NDArray[np.int64]
    network: dict[str, Any] | None
    solved: dict[str, Any] | None
    path: str


def read_order_file(path: str | os.PathLike[str]) -> OrderFile:
    """:func:`load_order` with the network record of a ``rankopt.order/1`` JSON file."""
    import json

    p = Path(path)
    record = solved = None
    try:
        if p.suffix == ".npy":
            data: Any = load_npy(p, what="order file")
        else:
            with open_regular(p, what="order file", max_bytes=MAX_TEXT_BYTES) as fh:
                raw = fh.read()
            if p.suffix == ".json":
                check_nesting(raw, f"order file {str(p)!r}")
                data = json.loads(raw)
                if isinstance(data, dict):
                    if "order" not in data:
                        raise RankoptInputError(f"order file {str(p)!r} has no 'order' key.")
                    record = data.get("network")
                    solved = data.get("solved")
                    data = data["order"]
            else:
                data = _text_order(raw, str(p))
    except FileNotFoundError:
        raise RankoptInputError(f"order file {str(p)!r} does not exist.") from None
    except (OSError, ValueError) as exc:
        if isinstance(exc, RankoptInputError):
            raise
        raise RankoptInputError(f"cannot read an order from {str(p)!r}: {exc}") from exc
    arr = _order_values(data, str(p))
    if record is not None:
        record = _check_record(record, len(arr), str(p))
    return OrderFile(arr, record, solved if isinstance(solved, dict) else None, str(p))


def _text_order(raw: bytes, path: str) -> list[int]:
    r"""The ranks of a text order: whole numbers split by blanks, commas or lines.

    ``#`` starts a comment; a byte-order mark is dropped. A token that is not
    a whole number is named with its line; an order with no number is refused.

    Examples
    --------
    >>> _text_order(b"# order\n2 0\n1, 3.0\n", "o.txt")
    [2, 0, 1, 3]
    """
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise RankoptInputError(f"order file {path!r} is not UTF-8 text.") from None
    out: list[int] = []
    for lineno, line in enumerate(text.splitlines(), 1):
        for token in line.split("#", 1)[0].replace(",", " ").split():
            try:
                out.append(int(token))
                continue
            except ValueError:
                pass
            try:
                value = float(token)  # 3.0 and 1e3 are whole numbers, as in a JSON order
            except ValueError:
                value = math.nan
            if not (math.isfinite(value) and value == int(value)):
                raise RankoptInputError(
                    f"order file {path!r}, line {lineno}: {token[:40]!r} is not a whole number."
                )
            out.append(int(value))
    if not out:
        raise RankoptInputError(f"order file {path!r} holds no order (no number in it).")
    return out


def _order_values(data: Any, path: str) -> NDArray[np.int64]:
    """The order held by a file's ``order`` value: whole numbers, one flat list (not ragged)."""
    if isinstance(data, list) and any(isinstance(v, (bool, str, dict)) or v is None for v in data):
        bad = next(v for v in data if isinstance(v, (bool, str, dict)) or v is None)
        raise RankoptInputError(
            f"order file {path!r}: the order must hold whole numbers; it holds {bad!r}."
        )
    try:
        arr = np.asarray(data)
    except (ValueError, TypeError, OverflowError) as exc:  # ragged [[0, 1], [2]]
        raise RankoptInputError(
            f"order file {path!r}: the order must be one list of whole numbers ({exc})."
        ) from None
    if arr.dtype.kind not in "iuf":
        raise RankoptInputError(
            f"order file {path!r}: the order must hold whole numbers; got dtype {arr.dtype}."
        )
    try:
        return as_order(arr.ravel() if arr.ndim > 1 else arr, name="order")
    except RankoptInputError as exc:
        raise RankoptInputError(f"order file {path!r}: {exc}") from None


def _check_record(record: Any, size: int, path: str) -> dict[str, Any]:
    """An order file's ``network`` record with its ``n`` and ``hosts`` checked against the order."""
    if not isinstance(record, dict):
        raise RankoptInputError(f"order file {path!r}: 'network' must be an object.")
    n = record.get("n", size)
    if isinstance(n, bool) or not isinstance(n, int):
        raise RankoptInputError(
            f"order file {path!r}: 'network.n' must be a whole number; got {n!r}."
        )
    if n != size:
        raise RankoptInputError(
            f"order file {path!r}: 'network.n' is {n}, but the order has {size} entries."
        )
    hosts = record.get("hosts")
    if hosts is not None:
        if not isinstance(hosts, list):
            raise RankoptInputError(
                f"order file {path!r}: 'network.hosts' must be a list of host names; "
                f"got {type(hosts).__name__}."
            )
        try:
            check_host_names(hosts, size, "network.hosts")
        except RankoptInputError as exc:
            raise RankoptInputError(f"order file {path!r}: {exc}") from None
    return record


def check_binding(
    order_file: OrderFile,
    n: int,
    hosts: Sequence[str] | None = None,
    *,
    what: str = "--order",
) -> None:
    """Refuse an order solved on another job: another size or other hosts.

    The order file's network record (:class:`OrderFile`) names the number of
    processes and the host of every launch rank it was solved for; an order
    over launch ranks means something only where every launch rank runs on
    the host it ran on then. Files without a record are checked for their
    length only.

    Raises
    ------
    RankoptInputError
        With a message that names the file, what differs and what to do.

    Examples
    --------
    >>> f = OrderFile(np.array([1, 0]), {"n": 2, "hosts": ["a", "b"], "date": "d"}, None, "o.json")
    >>> check_binding(f, 2, ["a", "b"])
    >>> check_binding(f, 2, ["b", "a"])
    Traceback (most recent call last):
    ...
    rankopt.errors.RankoptInputError: --order o.json was solved on other hosts: launch rank 0 ran on 'a' (probe of d) and runs on 'b' now (2 of 2 ranks moved); re-probe (drop --order) or solve again for these hosts.
    """
    rec = order_file.network
    size = len(order_file.order)
    src = f"{what} {order_file.path}"
    if rec is not None and int(rec.get("n", size)) != n or size != n:
        solved_n = int(rec.get("n", size)) if rec is not None else size
        raise RankoptInputError(
            f"{src} was solved for {solved_n} processes; this job has {n}: re-probe (drop "
            f"{what}) or solve again for {n} processes."
        )
    if rec is None or hosts is None or not rec.get("hosts"):
        return
    then = [str(h) for h in rec["hosts"]]
    now = [str(h) for h in hosts]
    moved = [i for i in range(n) if then[i] != now[i]]
    if moved:
        i = moved[0]
        raise RankoptInputError(
            f"{src} was solved on other hosts: launch rank {i} ran on {then[i]!r} (probe of "
            f"{rec.get('date', '?')}) and runs on {now[i]!r} now ({len(moved)} of {n} ranks "
            f"moved); re-probe (drop {what}) or solve again for these hosts."
        )


def save_order(
    path: str | os.PathLike[str],
    order: ArrayLike,
    *,
    what: str = "order file",
    network: Any = None,
    result: Any = None,
) -> Path:
    """Write an order atomically: ``.npy``, ``.json`` or one int per line.

    ``.json`` writes ``{"format": "rankopt.order/1", "order": [...]}`` and,
    with ``network`` (a :class:`rankopt.Network`), the network it was solved
    on (:func:`rankopt.network.network_record`: digest, date, hosts, n,
    hierarchy, matrices), and with ``result`` (a ``SolveResult``) what was
    modelled; :func:`check_binding` then refuses it on other hosts or another
    size, and ``rankopt check`` re-probes against it. ``what`` names the path
    in errors (``"--order-out"``); see :func:`rankopt._files.atomic_write` for
    what may exist at ``path``.
    """
    import json

    arr = as_order(order)
    p = Path(path)
    if p.suffix == ".npy":
        return atomic_write(p, lambda fh: np.save(fh, arr), what=what)
    if p.suffix == ".json":
        doc: dict[str, Any] = {"format": ORDER_FORMAT, "order": arr.tolist()}
        if network is not None:
            from rankopt.network.core import network_record

            doc["network"] = network_record(network)
        if result is not None:
            doc["solved"] = _solved(result)
        return atomic_write_text(p, json.dumps(doc) + "\n", what=what)
    return atomic_write_text(p, "\n".join(str(int(i)) for i in arr) + "\n", what=what)


def _solved(result: Any) -> dict[str, Any]:
    keys = ("collective", "algorithm", "objective", "nbytes", "speedup", "speedup_interval",
            "method", "seed", "stop_reason")  # fmt: skip
    out: dict[str, Any] = {}
    for k in keys:
        v = getattr(result, k, None)
        out[k] = list(v) if isinstance(v, tuple) else v
    return out


def parse_options(items: Sequence[str], flag: str = "--probe-option") -> dict[str, Any]:
    """Turn ``["repeats=3", "bandwidth=False"]`` into keyword arguments (Python literals).

    Examples
    --------
    >>> parse_options(["repeats=3", "bandwidth=False", "name=x"], flag="--option")
    {'repeats': 3, 'bandwidth': False, 'name': 'x'}

    As ``--probe-option`` (the default) every name must be a probe setting
    (:class:`~rankopt.probe._common.ProbeParams`), of its type, or ``cache``
    or ``topology``:

    >>> parse_options(["repeats=3", "bandwidth=False"])
    {'repeats': 3, 'bandwidth': False}
    """
    import ast

    out: dict[str, Any] = {}
    for item in items:
        key, sep, val = item.partition("=")
        if not sep or not key.isidentifier():
            raise RankoptInputError(f"{flag} expects KEY=VALUE; got {item!r}.")
        if len(val) > _MAX_OPTION_CHARS:
            raise RankoptInputError(
                f"{flag} {key}=...: the value has {len(val):,} characters; at most "
                f"{_MAX_OPTION_CHARS} are read."
            )
        try:
            out[key] = ast.literal_eval(val)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            out[key] = val
    if flag == "--probe-option":
        check_probe_settings(out, flag)
        _check_probe_option(out, flag)
    return out


def _check_probe_option(settings: dict[str, Any], flag: str) -> None:
    """Refuse an unknown probe setting, or a known one of the wrong type, before any probe.

    ``cache`` and ``topology`` are arguments of the probe, not settings; they pass.
    """
    from dataclasses import fields

    from rankopt.probe._common import ProbeParams, check_params

    known = [f.name for f in fields(ProbeParams)]
    unknown = sorted(set(settings) - set(known) - {"cache", "topology"})
    if unknown:
        raise RankoptInputError(
            f"{flag} {unknown[0]}=...: no such probe setting; the settings are "
            f"{', '.join(known)} (and cache, topology)."
        )
    try:
        check_params(**{k: v for k, v in settings.items() if k in known})
    except RankoptInputError as exc:
        raise RankoptInputError(f"{flag}: {exc}") from None


#: Longest value of one ``KEY=VALUE`` option.
_MAX_OPTION_CHARS = 1000


def option_digests(options: Mapping[str, Any]) -> dict[str, tuple[str, str]]:
    """``name -> (digest, short text)`` of every option, to compare them across ranks.

    The digest is of the pickled value (its type's name when it cannot be
    pickled); the text is what an error shows.
    """
    import hashlib
    import pickle

    out = {}
    for key in sorted(options):
        value = options[key]
        try:
            data = pickle.dumps(value, protocol=4)
        except Exception:  # noqa: BLE001 - a lambda, a lock: compared by type
            data = type(value).__qualname__.encode()
        text = repr(value)
        out[key] = (
            hashlib.sha256(data).hexdigest()[:16],
            text if len(text) <= 60 else text[:57] + "...",
        )
    return out
