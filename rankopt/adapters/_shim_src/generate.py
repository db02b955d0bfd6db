"""Generate the PMPI shim's wrappers from one table and the MPI's own header.

``wrappers.tbl`` (beside this file) lists the wrapped functions, one line
``name group action`` each; :data:`RECORDED` and :data:`TRAFFIC` say which of
them ``rankopt profile`` records, and how. The signature of each wrapper is read from the
declarations of the ``mpi.h`` the shim is compiled against (preprocessed by
that MPI's compiler wrapper, ``mpicc -E``), so the generated code matches the
library's own const-ness and types, and a function the library does not declare
is skipped rather than breaking the build. See the table's header comment for
the actions.

Run as a script to see the code for an MPI installation::

    mpicc -E -P - <<< '#include <mpi.h>' > mpi.i
    python -m rankopt.adapters._shim_src.generate mpi.i -o wrappers.c
"""

from __future__ import annotations

import argparse
import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "ACTIONS",
    "Declaration",
    "Entry",
    "Generated",
    "Param",
    "RECORDED",
    "Record",
    "TRAFFIC",
    "Flow",
    "TableError",
    "generate",
    "parse_declarations",
    "read_table",
]

TABLE = Path(__file__).with_name("wrappers.tbl")

ACTIONS = ("sub", "init", "finalize", "both", "attr", "unmap", "record")
#: Actions whose MPI-4 large-count twins ``<name>_c`` are wrapped too.
_TWINNED = ("sub", "record")


@dataclass(frozen=True)
class Record:
    """How a ``sub`` wrapper records its call for ``rankopt profile``.

    ``kind`` is the collective's rankopt name; the byte count is the
    parameter ``count`` (an element count, or with ``array`` a per-rank
    counts array that is summed) times the size of the datatype parameter
    ``type``, times the communicator size with ``per_rank``. Parameters are
    positions, fixed by the MPI standard for every library. ``count=None``
    records zero bytes (a barrier).
    """

    kind: str
    count: int | None = None
    type: int | None = None
    per_rank: bool = False
    array: bool = False


#: The collectives ``rankopt profile`` records (blocking and non-blocking
#: forms; the MPI-4 ``_c`` twins too). Sizes follow rankopt's convention:
#: allreduce the vector, allgather the gathered output, reduce_scatter the
#: input vector, alltoall each rank's whole send buffer (the receive side's
#: arguments, which ``MPI_IN_PLACE`` keeps meaningful), broadcast and
#: reduce the message. ``alltoallv`` and ``barrier`` are recorded for the
#: report, not for the workload. Persistent collectives (``*_init``) are not
#: recorded: their calls happen at ``MPI_Start``.
RECORDED: dict[str, Record] = {}
for _name, _rec in {
    "Allreduce": Record("allreduce", 2, 3),
    "Bcast": Record("broadcast", 1, 2),
    "Reduce": Record("reduce", 2, 3),
    "Allgather": Record("allgather", 4, 5, per_rank=True),
    "Allgatherv": Record("allgather", 4, 6, array=True),
    "Alltoall": Record("alltoall", 4, 5, per_rank=True),
    "Alltoallv": Record("alltoallv", 1, 3, array=True),
    "Reduce_scatter_block": Record("reduce_scatter", 2, 3, per_rank=True),
    "Reduce_scatter": Record("reduce_scatter", 2, 3, array=True),
    "Barrier": Record("barrier"),
}.items():
    RECORDED[f"MPI_{_name}"] = RECORDED[f"MPI_I{_name.lower()}"] = _rec


@dataclass(frozen=True)
class Flow:
    """How a wrapper records the point-to-point traffic of its call.

    ``call`` is a C statement (or several, ``;``-separated) calling the
    traffic recorder (``shim_traffic.c``). In it ``{pN}`` stands for the
    name of parameter ``N`` (positions are fixed by the MPI standard),
    ``{bigN}`` for ``1`` when that parameter is an ``MPI_Count`` array (the
    large-count ``_c`` twin) and ``0`` otherwise, and ``{comm}`` for the
    communicator the library sees (the reordered one for
    ``MPI_COMM_WORLD``). With ``after`` the statement runs after a
    successful call (it reads the persistent request the call made);
    otherwise before the call.
    """

    call: str
    after: bool = False

    def indices(self) -> list[int]:
        return [int(i) for i in re.findall(r"\{(?:p|big)(\d+)\}", self.call)]


def _send(count: str = "{p1}", type_: str = "{p2}", dest: str = "{p3}", request: str = "") -> Flow:
    persist = request or "NULL"
    return Flow(
        f"rankopt_traffic_send({count}, {type_}, {dest}, {{comm}}, {persist})", bool(request)
    )


def _rma(count: str, type_: str, target: str, win: str, back: bool) -> str:
    return f"rankopt_traffic_rma({count}, {type_}, {target}, {win}, {int(back)})"


#: The calls whose traffic ``rankopt profile`` records, by source and
#: destination (the ``_c`` twins too): sends (at the call; persistent ones at
#: every ``MPI_Start``/``MPI_Startall``), the send half of sendrecv, the
#: send blocks of alltoallv/w and of the neighbourhood collectives, and
#: one-sided puts, accumulates (origin to target) and gets (target to origin).
TRAFFIC: dict[str, Flow] = {}
for _name in ("Send", "Bsend", "Ssend", "Rsend", "Isend", "Ibsend", "Issend", "Irsend"):
    TRAFFIC[f"MPI_{_name}"] = _send()
for _name in ("Send_init", "Bsend_init", "Ssend_init", "Rsend_init"):
    TRAFFIC[f"MPI_{_name}"] = _send(request="{p6}")
for _name in ("Sendrecv", "Isendrecv", "Sendrecv_replace", "Isendrecv_replace"):
    TRAFFIC[f"MPI_{_name}"] = _send()
TRAFFIC["MPI_Psend_init"] = _send("(long long){p1} * {p2}", "{p3}", "{p4}", "{p8}")
TRAFFIC["MPI_Start"] = Flow("rankopt_traffic_start(1, {p0})")
TRAFFIC["MPI_Startall"] = Flow("rankopt_traffic_start({p0}, {p1})")
TRAFFIC["MPI_Request_free"] = Flow("rankopt_traffic_forget({p0})")
# (sendbuf, sendcounts, sdispls, sendtype(s), recvbuf, recvcounts, rdispls, recvtype(s), comm, ...)
for _kind in ("alltoallv", "alltoallw"):
    _v = f"rankopt_traffic_{_kind}({{p0}}, {{p1}}, {{p3}}, {{p5}}, {{p7}}, {{big1}}, {{comm}}, "
    _cap = _kind.capitalize()
    TRAFFIC[f"MPI_{_cap}"] = TRAFFIC[f"MPI_I{_kind}"] = Flow(_v + "NULL)")
    TRAFFIC[f"MPI_{_cap}_init"] = Flow(_v + "{p10})", after=True)
    _n = f"rankopt_traffic_neighbor_{_kind[-1]}({{p1}}, {{p3}}, {{big1}}, {{comm}}, "
    TRAFFIC[f"MPI_Neighbor_{_kind}"] = TRAFFIC[f"MPI_Ineighbor_{_kind}"] = Flow(_n + "NULL)")
    TRAFFIC[f"MPI_Neighbor_{_kind}_init"] = Flow(_n + "{p10})", after=True)
# (sendbuf, sendcount, sendtype, recvbuf, recvcount(s), ..., comm, [info, request])
for _kind, _req in (("alltoall", "{p8}"), ("allgather", "{p8}"), ("allgatherv", "{p9}")):
    _n = "rankopt_traffic_neighbor({p1}, {p2}, {comm}, "
    TRAFFIC[f"MPI_Neighbor_{_kind}"] = TRAFFIC[f"MPI_Ineighbor_{_kind}"] = Flow(_n + "NULL)")
    TRAFFIC[f"MPI_Neighbor_{_kind}_init"] = Flow(_n + _req + ")", after=True)
for _name, _win in (("Put", 7), ("Rput", 7), ("Accumulate", 8), ("Raccumulate", 8)):
    TRAFFIC[f"MPI_{_name}"] = Flow(_rma("{p1}", "{p2}", "{p3}", f"{{p{_win}}}", False))
for _name in ("Get", "Rget"):
    TRAFFIC[f"MPI_{_name}"] = Flow(_rma("{p1}", "{p2}", "{p3}", "{p7}", True))
for _name in ("Get_accumulate", "Rget_accumulate"):
    _to = _rma("{p1}", "{p2}", "{p6}", "{p11}", False)
    TRAFFIC[f"MPI_{_name}"] = Flow(f"{_to}; {_rma('{p4}', '{p5}', '{p6}', '{p11}', True)}")
TRAFFIC["MPI_Fetch_and_op"] = Flow(
    f"{_rma('1', '{p2}', '{p3}', '{p6}', False)}; {_rma('1', '{p2}', '{p3}', '{p6}', True)}"
)
TRAFFIC["MPI_Compare_and_swap"] = Flow(
    f"{_rma('2', '{p3}', '{p4}', '{p6}', False)}; {_rma('1', '{p3}', '{p4}', '{p6}', True)}"
)


_C_TYPE_WORDS = frozenset(
    "void char short int long float double signed unsigned _Bool const volatile restrict "
    "struct union enum".split()
)
_UNAVAILABLE = "__rankopt_unavailable__"


class TableError(ValueError):
    """The wrapper table, or the header it is matched against, is not usable."""


@dataclass(frozen=True)
class Entry:
    """One line of the wrapper table."""

    name: str
    group: str
    action: str
    line: int


@dataclass(frozen=True)
class Param:
    """One parameter of a C declaration: ``type name suffix``."""

    type: str
    name: str
    suffix: str = ""

    @property
    def is_comm(self) -> bool:
        """True for a by-value ``MPI_Comm`` parameter."""
        return not self.suffix and re.fullmatch(r"(const\s+)?MPI_Comm", self.type) is not None

    def declare(self) -> str:
        sep = "" if self.type.endswith("*") else " "
        return f"{self.type}{sep}{self.name}{self.suffix}"


@dataclass(frozen=True)
class Declaration:
    """A function declaration found in the header."""

    name: str
    ret: str
    params: tuple[Param, ...]

    def signature(self) -> str:
        params = ", ".join(p.declare() for p in self.params) or "void"
        return f"{self.ret} {self.name}({params})"


@dataclass(frozen=True)
class Generated:
    """The generated C code and what it covers."""

    code: str
    wrapped: tuple[str, ...]
    skipped: tuple[str, ...]


def read_table(path: str | Path | None = None) -> list[Entry]:
    """Read the wrapper table.

    Parameters
    ----------
    path : str or Path, optional
        The table; ``wrappers.tbl`` beside this module by default.

    Returns
    -------
    list of Entry
        In table order.

    Raises
    ------
    TableError
        On a malformed line, an unknown action or a repeated name.

    Examples
    --------
    >>> entries = read_table()
    >>> [e.action for e in entries if e.name == "MPI_Init"]
    ['init']
    """
    path = TABLE if path is None else Path(path)
    entries: list[Entry] = []
    seen: dict[str, int] = {}
    for lineno, raw in enumerate(path.read_text().splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split()
        if len(fields) != 3 or not re.fullmatch(r"MPI_\w+", fields[0]):
            raise TableError(f"{path}:{lineno}: expected `MPI_name group action`, got {raw!r}")
        name, group, action = fields
        if action not in ACTIONS:
            raise TableError(
                f"{path}:{lineno}: unknown action {action!r} for {name}; expected one of {ACTIONS}"
            )
        if name in seen:
            raise TableError(f"{path}:{lineno}: {name} is already listed on line {seen[name]}")
        seen[name] = lineno
        entries.append(Entry(name, group, action, lineno))
    return entries


def _strip_attributes(text: str) -> str:
    """Remove ``__attribute__((...))``; mark unavailable functions."""
    out: list[str] = []
    i = 0
    key = "__attribute__"
    while True:
        j = text.find(key, i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        out.append(text[i:j])
        k = text.find("(", j)
        end = _match_paren(text, k)
        body = text[k:end]
        unavailable = re.search(r"\b_*(error|unavailable)_*\b", body) is not None
        out.append(f" {_UNAVAILABLE} " if unavailable else " ")
        i = end


def _match_paren(text: str, start: int) -> int:
    """Index just past the parenthesis that closes ``text[start]``."""
    depth = 0
    i = start
    quote = ""
    while i < len(text):
        c = text[i]
        if quote:
            if c == "\\":
                i += 1
            elif c == quote:
                quote = ""
        elif c in "\"'":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    raise TableError(f"unbalanced parentheses in the MPI header near {text[start : start + 60]!r}")


def _split_params(text: str) -> list[str]:
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for c in text:
        if c in "([":
            depth += 1
        elif c in ")]":
            depth -= 1
        if c == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(c)
    parts.append("".join(cur))
    return [p.strip() for p in parts]


def _parse_param(text: str, index: int, func: str) -> Param:
    m = re.fullmatch(r"(?P<head>.*?)\s*(?P<suffix>(\[[^\]]*\]\s*)*)", text)
    assert m is not None
    head, suffix = m["head"], re.sub(r"\s+", "", m["suffix"])
    if "(" in head or "..." in head:
        raise TableError(f"{func}: cannot wrap the parameter {text!r}")
    name = f"arg{index}"
    m = re.fullmatch(r"(?P<type>.*?[\w*])\s*\b(?P<name>[A-Za-z_]\w*)", head)
    if m is not None:
        words = re.findall(r"[A-Za-z_]\w*", m["type"])
        named = (
            m["name"] not in _C_TYPE_WORDS
            and not m["name"].startswith("MPI_")
            and (any(w not in ("const", "volatile") for w in words) or "*" in m["type"])
        )
        if named:
            head, name = m["type"], m["name"]
    ctype = re.sub(r"\s*\*\s*", " *", re.sub(r"\s+", " ", head)).strip()
    ctype = ctype.replace("* *", "**").replace("* *", "**")
    return Param(ctype, name, suffix)


def parse_declarations(header: str, names: Iterable[str]) -> dict[str, Declaration]:
    """Find the declarations of ``names`` in preprocessed header text.

    Parameters
    ----------
    header : str
        ``mpi.h`` after the C preprocessor (``mpicc -E``).
    names : iterable of str
        Function names to look for.

    Returns
    -------
    dict
        Name to Declaration, for the names declared (and not marked
        unavailable) in the header.

    Examples
    --------
    >>> h = "int MPI_Barrier(MPI_Comm comm) __attribute__((visibility(\\"default\\")));"
    >>> parse_declarations(h, ["MPI_Barrier", "MPI_Send"])["MPI_Barrier"].signature()
    'int MPI_Barrier(MPI_Comm comm)'
    """
    text = "\n".join(ln for ln in header.splitlines() if not ln.lstrip().startswith("#"))
    text = re.sub(r"\s+", " ", _strip_attributes(text))
    found: dict[str, Declaration] = {}
    for name in names:
        for m in re.finditer(rf"(?<![\w$]){re.escape(name)}\s*\(", text):
            start = max(text.rfind(c, 0, m.start()) for c in ";{}") + 1
            ret = text[start : m.start()]
            end = _match_paren(text, m.end() - 1)
            rest = text[end:].lstrip()
            if not rest.startswith(";") and not rest.startswith(_UNAVAILABLE):
                continue
            if "typedef" in ret or "(" in ret or ")" in ret:
                continue
            if _UNAVAILABLE in ret or rest.startswith(_UNAVAILABLE):
                break
            ret = " ".join(w for w in ret.split() if w not in ("extern", "__extension__"))
            raw = _split_params(text[m.end() : end - 1])
            if raw == ["void"] or raw == [""]:
                raw = []
            params = tuple(_parse_param(p, i, name) for i, p in enumerate(raw))
            found[name] = Declaration(name, ret.strip(), params)
            break
    return found


def _call(decl: Declaration, comm_expr: str = "rankopt_in({})") -> str:
    args = [comm_expr.format(p.name) if p.is_comm else p.name for p in decl.params]
    return f"P{decl.name}({', '.join(args)})"


def _flow_code(flow: Flow, decl: Declaration, comm: Param | None, where: str) -> str:
    """The traffic statement of ``flow`` for ``decl``'s parameters."""
    params = decl.params
    if any(i >= len(params) for i in flow.indices()):
        raise TableError(f"{where}: the recorded traffic names a parameter the call lacks")
    names = {f"p{i}": p.name for i, p in enumerate(params)}
    names.update({f"big{i}": str(int("MPI_Count" in p.type)) for i, p in enumerate(params)})
    names["comm"] = f"rankopt_in({comm.name})" if comm is not None else "MPI_COMM_NULL"
    return flow.call.format(**names)


def _record_body(
    entry: Entry,
    decl: Declaration,
    rec: Record | None,
    flow: Flow | None,
    comm: Param | None,
    where: str,
) -> list[str]:
    """A wrapper that also records the call: its collective class (blocking
    calls with their time) and its traffic."""
    if decl.ret != "int":
        raise TableError(f"{where}: a recorded call needs an int return")
    params = decl.params
    lines = [f"if (!rankopt_recording) return {_call(decl)};"]
    traffic = "" if flow is None else _flow_code(flow, decl, comm, where) + ";"
    if flow is not None and not flow.after:
        lines.append(traffic)
    record = ""
    if rec is not None and comm is not None:
        if rec.count is None or rec.type is None:
            elements, dtype = "0", "MPI_DATATYPE_NULL"
        else:
            if max(rec.count, rec.type) >= len(params):
                raise TableError(f"{where}: the recorded count or type parameter is missing")
            cnt, dtype = params[rec.count], params[rec.type].name
            if rec.array:
                helper = "count" if "MPI_Count" in cnt.type else "int"
                elements = f"rankopt_sum_counts_{helper}({cnt.name}, {comm.name})"
            else:
                elements = f"(long long){cnt.name}"
        record = (
            f'rankopt_record("{rec.kind}", {elements}, {dtype}, {comm.name}, {int(rec.per_rank)}'
        )
    after = [] if flow is None or not flow.after else [f"if (rc_ == MPI_SUCCESS) {traffic}"]
    if record and entry.group == "coll":  # blocking: the call's time too
        return lines + [
            "double t0_ = PMPI_Wtime();",
            f"int rc_ = {_call(decl)};",
            f"{record}, PMPI_Wtime() - t0_);",
            *after,
            "return rc_;",
        ]
    if record:
        lines.append(f"{record}, 0.0);")
    if after:
        return lines + [f"int rc_ = {_call(decl)};", *after, "return rc_;"]
    return lines + [f"return {_call(decl)};"]


def _body(entry: Entry, decl: Declaration) -> list[str]:
    comms = [p for p in decl.params if p.is_comm]
    where = f"{entry.name} (wrappers.tbl line {entry.line})"
    if entry.action in ("sub", "both", "attr") and not comms:
        raise TableError(f"{where}: action {entry.action!r} but no MPI_Comm argument")
    if entry.action in ("init", "finalize", "both", "attr") and decl.ret != "int":
        raise TableError(f"{where}: action {entry.action!r} needs an int return")
    plain = _call(decl, "{}")
    base = entry.name[:-2] if entry.name.endswith("_c") else entry.name
    if entry.action == "sub":
        rec, flow = RECORDED.get(base), TRAFFIC.get(base)
        if rec is not None or flow is not None:
            return _record_body(entry, decl, rec, flow, comms[0], where)
        return [f"return {_call(decl)};"]
    if entry.action == "record":
        if base not in TRAFFIC:
            raise TableError(f"{where}: action 'record' but no traffic is recorded for it")
        return _record_body(entry, decl, None, TRAFFIC[base], None, where)
    if entry.action == "init":
        return [
            f"int rc = {plain};",
            "if (rc == MPI_SUCCESS) rankopt_after_init();",
            "return rc;",
        ]
    if entry.action == "finalize":
        return ["rankopt_before_finalize();", f"return {plain};"]
    if entry.action == "both":
        differs = " || ".join(f"{p.name} != rankopt_in({p.name})" for p in comms)
        return [
            f"int rc = {plain};",
            f"if (rc == MPI_SUCCESS && ({differs})) rc = {_call(decl)};",
            "return rc;",
        ]
    if entry.action == "attr":
        p = decl.params
        if len(p) != 4 or not p[0].is_comm or p[1].type != "int" or p[3].type != "int *":
            raise TableError(f"{where}: action 'attr' needs (MPI_Comm, int, void *, int *)")
        return [
            f"int rc = {_call(decl)};",
            f"if (rc == MPI_SUCCESS && !*{p[3].name} && rankopt_world != MPI_COMM_NULL",
            f"    && rankopt_is_predefined_keyval({p[1].name}))",
            f"    rc = P{decl.name}(MPI_COMM_WORLD, {p[1].name}, {p[2].name}, {p[3].name});",
            "return rc;",
        ]
    if decl.ret != "MPI_Comm":
        raise TableError(f"{where}: action 'unmap' needs an MPI_Comm return")
    return [f"return rankopt_out({plain});"]


def generate(
    header: str, entries: list[Entry] | None = None, *, source: str = "mpi.h"
) -> Generated:
    """Generate the C code of the wrappers.

    Parameters
    ----------
    header : str
        Preprocessed ``mpi.h`` of the target MPI.
    entries : list of Entry, optional
        The table; ``read_table()`` by default.
    source : str
        Describes the header in the generated file's banner.

    Returns
    -------
    Generated
        ``code`` (a C translation unit that includes ``rankopt_shim.h``),
        ``wrapped`` (the functions it defines) and ``skipped`` (table names
        the header does not declare).

    Raises
    ------
    TableError
        If a declared function does not fit its action, or a wrapped
        function and its ``PMPI_`` twin are not both declared.

    Examples
    --------
    >>> h = "int MPI_Comm_size(MPI_Comm comm, int *size); int PMPI_Comm_size(MPI_Comm, int *);"
    >>> g = generate(h, [Entry("MPI_Comm_size", "comm", "sub", 1)])
    >>> print(g.code.split("\\n\\n")[-1].strip())
    RANKOPT_EXPORT int MPI_Comm_size(MPI_Comm comm, int *size)
    {
        return PMPI_Comm_size(rankopt_in(comm), size);
    }
    """
    entries = read_table() if entries is None else entries
    wanted: list[Entry] = []
    for e in entries:
        wanted.append(e)
        if e.action in _TWINNED:
            wanted.append(Entry(e.name + "_c", e.group, e.action, e.line))
    names = [e.name for e in wanted]
    decls = parse_declarations(header, names + ["P" + n for n in names])
    lines = [
        f"/* Generated by rankopt/adapters/_shim_src/generate.py from wrappers.tbl for {source}.",
        " * Do not edit: change the table or the generator. */",
        '#include "rankopt_shim.h"',
    ]
    wrapped, skipped = [], []
    for e in wanted:
        decl = decls.get(e.name)
        if decl is None:
            if not e.name.endswith("_c") or e.action not in _TWINNED or e.name[:-2] not in names:
                skipped.append(e.name)
            continue
        if "P" + e.name not in decls:
            raise TableError(f"{e.name} is declared in {source} but P{e.name} is not")
        body = "\n".join("    " + ln for ln in _body(e, decl))
        lines.append(f"\nRANKOPT_EXPORT {decl.signature()}\n{{\n{body}\n}}")
        wrapped.append(e.name)
    return Generated("\n".join(lines) + "\n", tuple(wrapped), tuple(skipped))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("header", type=Path, help="preprocessed mpi.h (mpicc -E)")
    parser.add_argument("-o", "--output", type=Path, default=Path("wrappers.c"))
    parser.add_argument("--table", type=Path, default=TABLE)
    args = parser.parse_args(argv)
    gen = generate(args.header.read_text(), read_table(args.table), source=str(args.header))
    from rankopt._files import atomic_write_text

    atomic_write_text(args.output, gen.code, what="--output")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logging.getLogger("rankopt").info(
        "%s: %d wrappers; not declared: %s", args.output, len(gen.wrapped), " ".join(gen.skipped)
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
