"""Network topology from the provider or the scheduler: group labels per level for hosts.

Contents
--------
read_topology
    Read a topology file of any supported kind (detected from its content)
    and return :class:`TopologyLabels`.
TopologyLabels
    Host -> group names per level (finest first); ``groups(hosts)`` gives the
    nested integer labels of :class:`rankopt.Network`.
from_slurm_conf, from_slurm_yaml, from_slurm_env, from_aws, from_gcp, from_kubernetes, from_text
    The readers, one per source (text in, labels out).
from_aws_instances
    Other names of EC2 instances (private DNS names, IPs) from
    ``DescribeInstances``, to match the job's host names to instance IDs.
apply_topology
    A :class:`rankopt.Network` with the provider's groups and the probe's
    uplink capacities.
compare_with_bandwidth
    Where the probe's bandwidth disagrees with the provider's groups.
expand_hostlist
    Slurm's hostlist expressions (``tux[0-3,12]``).

Sources and what they give (finest level first)
-----------------------------------------------
- Slurm ``topology.conf`` and ``scontrol show topology`` (topology/tree:
  ``SwitchName=... Nodes=...``/``Switches=...``; topology/block:
  ``BlockName=... Nodes=...`` and ``BlockSizes=``): the leaf switch, then
  every switch above it; or the block, then the aggregated blocks of
  ``BlockSizes``. Keys are case-insensitive, as Slurm reads them.
- Slurm ``topology.yaml`` (23.11+), read with PyYAML's safe loader: the
  ``cluster_default`` topology (else the first), ``tree.switches``
  (``switch``, ``children``, ``nodes``) or ``block.blocks`` (``block``,
  ``nodes``) with ``block.block_sizes``.
- ``SLURM_TOPOLOGY_ADDR`` / ``SLURM_TOPOLOGY_ADDR_PATTERN``: one
  ``host addr [pattern]`` line per host (each process knows only its own;
  gather them), the address being the switches from the top down to the
  node, separated by dots.
- AWS EC2 ``DescribeInstanceTopology`` JSON: ``Instances[].NetworkNodes``
  (top layer first); hosts are instance IDs, matched to the job's host
  names through a ``DescribeInstances`` JSON (``aliases``).
- GCP: instances JSON with ``resourceStatus.physicalHostTopology``
  (``host``, ``subblock``, ``block``, ``cluster``; else ``physicalHost``,
  ``/BLOCK/SUBBLOCK/HOST``): ``gcloud compute
  instances list --format=json``, the API's ``list`` (``{"items": [...]}``)
  or ``aggregatedList`` (``{"items": {"zones/...": {"instances": [...]}}}``).
- Kubernetes ``kubectl get nodes -o json``: node labels; known keys
  (GKE ``cloud.google.com/gce-topology-{host,subblock,block}``, EKS
  ``topology.k8s.aws/network-node-layer-N``, Topograph
  ``network.topology.nvidia.com/{accelerator,leaf,spine,core}`` (before
  0.2: ``block``, ``datacenter``; from 1.0: ``accelerator.topograph.run/
  {sub-domain,domain}``, ``fabric.topograph.run/tier-N``),
  ``topology.kubernetes.io/{zone,region}``) or the ``keys`` given; a
  node's addresses (``status.addresses``) are other names for it.
- Plain text: ``host rack pod ...`` per line (``#`` comments).

Host names
----------
The job's host names (as MPI or torchrun report them) are matched to the
source's names by :meth:`TopologyLabels.match`: the exact name; else the
same name up to case and a trailing dot; else the same short name (the part
before the first dot: ``node1`` and ``node1.cluster.local``) when it is
unique on both sides. The source's names include its aliases (an EC2
instance's private DNS names and IPs). A short name that matches two of the
source's names, or two job hosts that match one, is an error naming both;
so is a host name (the job's, or one of a text topology's lines) that
:func:`rankopt._validation.check_host_name` refuses.

Labels give the groups; the probe gives the capacities: apply_topology
keeps the network's bandwidth and infers each group's uplink from it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError, check_host_name
from rankopt.units import format_rate

__all__ = [
    "TopologyLabels",
    "read_topology",
    "from_slurm_conf",
    "from_slurm_yaml",
    "from_slurm_env",
    "from_aws",
    "from_aws_instances",
    "from_gcp",
    "from_kubernetes",
    "from_text",
    "apply_topology",
    "compare_with_bandwidth",
    "expand_hostlist",
    "check_host_name",
    "KUBERNETES_KEYS",
]

MAX_BYTES = 64 << 20
#: Most characters of a ``topology.yaml`` (a YAML parser needs several times the text).
MAX_YAML_CHARS = 8 << 20
#: Most names one hostlist expression may expand to.
MAX_HOSTLIST = 1 << 20

#: Kubernetes node label keys read by default, finest first.
#: Topograph's labels: before 0.2 ``block`` (the leaf) and ``datacenter`` (the core);
#: from 1.0 ``accelerator.topograph.run/...`` and ``fabric.topograph.run/tier-N`` (tier 0
#: is the switch next to the node).
KUBERNETES_KEYS = (
    "cloud.google.com/gce-topology-host",
    "accelerator.topograph.run/sub-domain",
    "accelerator.topograph.run/domain",
    "network.topology.nvidia.com/accelerator",
    "topology.k8s.aws/network-node-layer-4",
    "topology.k8s.aws/network-node-layer-3",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-1",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-block",
    *(f"fabric.topograph.run/tier-{n}" for n in range(8)),
    "network.topology.nvidia.com/leaf",
    "network.topology.nvidia.com/block",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/core",
    "network.topology.nvidia.com/datacenter",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
)


@dataclass(frozen=True)
class TopologyLabels:
    """Group names per level for every host a topology source knows, finest level first.

    Attributes
    ----------
    source : str
        The kind of source (``"slurm-tree"``, ``"aws"``, ...).
    levels : tuple of str
        Name of every level, finest first (``"leaf switch"``, ``"block"``...).
    labels : dict of str -> tuple of str
        ``labels[host][k]``: the group of ``host`` at level ``k``.
    notes : tuple of str
        What the reader noticed (hosts without a label, levels dropped).
    aliases : tuple of (str, str)
        ``(other name, name)`` pairs: other names of the source's hosts (an
        EC2 instance's private DNS names and IPs, see
        :func:`from_aws_instances`), used by :meth:`match`.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_text
    >>> t = from_text("a r1 p1\\nb r1 p1\\nc r2 p1\\n")
    >>> [g.tolist() for g in t.groups(["a", "a", "b", "c"])]
    [[0, 0, 1, 2], [0, 0, 0, 1]]
    """

    source: str
    levels: tuple[str, ...]
    labels: dict[str, tuple[str, ...]]
    notes: tuple[str, ...] = field(default_factory=tuple)
    aliases: tuple[tuple[str, str], ...] = field(default_factory=tuple)

    def match(
        self, hosts: Sequence[str], *, aliases: Mapping[str, str] | None = None
    ) -> dict[str, str]:
        """The source's name for every distinct job host.

        A host matches the source's name that equals it; else the one equal
        up to case and a trailing dot; else the one with the same short name
        (the part before the first dot), if only one has it. Other names of
        the source's hosts (:attr:`aliases`, then ``aliases``) are matched
        the same way and stand for the host they name.

        Parameters
        ----------
        hosts : sequence of str
            Host of every process, as MPI or torchrun report them.
        aliases : mapping, optional
            Other name -> the source's name for it (an instance ID).

        Returns
        -------
        dict of str -> str
            Job host -> the source's name (a key of :attr:`labels`).

        Raises
        ------
        RankoptInputError
            If a host name is neither an RFC 1123 host name nor an IP address;
            if a short name matches two of the source's hosts, or two job
            hosts match one; or if the source does not know some host (the
            first few named).

        Examples
        --------
        >>> from rankopt.probe.topology_sources import from_text
        >>> t = from_text("node1.cluster.local r1\\nnode2.cluster.local r2\\n")
        >>> t.match(["node2", "node1"])
        {'node2': 'node2.cluster.local', 'node1': 'node1.cluster.local'}
        """
        distinct = list(dict.fromkeys(hosts))
        for h in distinct:
            check_host_name(h, "job host")
        found: dict[str, str] = {}
        index: _NameIndex | None = None
        missing: list[str] = []
        for h in distinct:
            if h in self.labels:
                found[h] = h
                continue
            if index is None:  # built only when some host is not named exactly
                index = _NameIndex(self, aliases)
            key = index.find(h)
            if key is None:
                missing.append(h)
            else:
                found[h] = key
        if missing:
            missing.sort()
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            hint = ""
            if self.source == "aws" and not self.aliases and not aliases:
                hint = (
                    " (the topology names instance IDs: give the EC2 DescribeInstances JSON "
                    "with --topology-aliases)"
                )
            raise RankoptInputError(
                f"the {self.source} topology does not name {len(missing)} of the job's hosts: "
                f"{shown}{hint}."
            )
        taken: dict[str, str] = {}
        for h, key in found.items():
            other = taken.setdefault(key, h)
            if other != h:
                raise RankoptInputError(
                    f"job hosts {other!r} and {h!r} both match {key!r} of the {self.source} "
                    "topology; expected one source host per job host (give full host names)."
                )
        return found

    def fingerprint(self) -> str:
        """A digest of the source, levels, labels and aliases: equal for equal topologies.

        >>> from rankopt.probe.topology_sources import from_text
        >>> a, b = from_text("a r1\\nb r2\\n"), from_text("b r2\\na r1\\n")
        >>> a.fingerprint() == b.fingerprint() != from_text("a r1\\nb r1\\n").fingerprint()
        True
        """
        import hashlib
        import json

        doc = [self.source, list(self.levels), sorted(self.labels.items()), sorted(self.aliases)]
        return hashlib.sha256(json.dumps(doc).encode()).hexdigest()[:32]

    def groups(
        self, hosts: Sequence[str], *, aliases: Mapping[str, str] | None = None
    ) -> list[NDArray[np.int64]]:
        """Nested integer group labels for processes on ``hosts``, hosts first.

        Level 0 labels the hosts; each provider level follows, made nested
        (a group is the tuple of its names on that level and every coarser
        one); levels that split nothing among these hosts are left out.
        Host names are matched to the source's as :meth:`match` does.

        Parameters
        ----------
        hosts : sequence of str
            Host of every process.
        aliases : mapping, optional
            Other name -> the name the source uses (an instance ID).

        Returns
        -------
        list of ndarray of int64, shape (n,)

        Raises
        ------
        RankoptInputError
            If a host name is invalid or ambiguous, or the source does not
            know some host (see :meth:`match`).
        """
        from rankopt.probe.hierarchy import host_labels

        found = self.match(hosts, aliases=aliases)
        keys = [found[h] for h in hosts]
        out = [host_labels(hosts)]
        for k in range(len(self.levels)):
            # a group is named by its names on this level and every coarser one: nested
            lab = host_labels(["\x1f".join(self.labels[key][k:]) for key in keys])
            if 1 < int(lab.max()) + 1 < int(out[-1].max()) + 1:
                out.append(lab)
        return out


_IP_LIKE = re.compile(r"[0-9.]+\Z|.*:")


class _NameIndex:
    """The source's names and aliases by full and short name, each with the key it stands for."""

    def __init__(self, topo: TopologyLabels, extra: Mapping[str, str] | None) -> None:
        labels = topo.labels
        pairs = list(topo.aliases) + list((extra or {}).items())
        # an alias stands for a host the source knows: by its target, or by another of its names
        names_of: dict[str, set[str]] = {}
        for alias, target in pairs:
            names_of.setdefault(target, {target}).add(alias)
        key_of: dict[str, str] = {}
        for target, names in names_of.items():
            known = [target] if target in labels else sorted(n for n in names if n in labels)
            if known:
                key_of[target] = known[0]
        self.source = topo.source
        self.full: dict[str, dict[str, set[str]]] = {}
        self.short: dict[str, dict[str, set[str]]] = {}
        for name in labels:
            self._add(name, name)
        for alias, target in pairs:
            if target in key_of:
                self._add(alias, key_of[target])

    @staticmethod
    def _norm(name: str) -> str:
        return name.lower().rstrip(".")

    def _add(self, name: str, key: str) -> None:
        norm = self._norm(name)
        self.full.setdefault(norm, {}).setdefault(key, set()).add(name)
        if not _IP_LIKE.match(norm):
            self.short.setdefault(norm.split(".", 1)[0], {}).setdefault(key, set()).add(name)

    def find(self, host: str) -> str | None:
        norm = self._norm(host)
        for table, name, how in (
            (self.full, norm, "name"),
            (None if _IP_LIKE.match(norm) else self.short, norm.split(".", 1)[0], "short name"),
        ):
            hits = table.get(name) if table is not None else None
            if not hits:
                continue
            if len(hits) > 1:
                a, b = (sorted(hits[k])[0] for k in sorted(hits)[:2])
                raise RankoptInputError(
                    f"job host {host!r} matches both {a!r} and {b!r} of the {self.source} "
                    f"topology by {how}; expected one (give full host names)."
                )
            return next(iter(hits))
        return None


# ---------------------------------------------------------------------- helpers
def read_text(path: str | os.PathLike[str], what: str) -> str:
    from rankopt._files import open_regular

    with open_regular(path, what=what, max_bytes=MAX_BYTES) as fh:
        return fh.read().decode("utf-8", errors="replace")


def _json(text: str) -> Any:
    """A topology document parsed, its nesting bounded first (:func:`rankopt._limits.check_nesting`)."""
    from rankopt._limits import check_nesting

    check_nesting(text, "topology document")
    try:
        return json.loads(text)
    except RecursionError:  # pragma: no cover - check_nesting bounds the depth first
        raise RankoptInputError("topology document: JSON nested too deeply.") from None


def _json_objects(value: Any, field: str, what: str) -> list[dict[str, Any]]:
    """A JSON list of objects (``field`` of a ``what`` document); absent or null: none."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise RankoptInputError(
            f"{what}: `{field}` is {type(value).__name__} {str(value)[:40]!r}; expected a list."
        )
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise RankoptInputError(
                f"{what}: {field}[{i}] is {type(item).__name__} {str(item)[:40]!r}; "
                "expected an object."
            )
    return value


def _json_name(item: Mapping[str, Any], key: str, where: str) -> str:
    """The non-empty string ``item[key]``; else an error naming ``where`` and the value."""
    value = item.get(key)
    if not isinstance(value, str) or not value:
        raise RankoptInputError(f"{where}: `{key}` is {value!r}; expected a name.")
    return value


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression.

    Commas outside brackets separate names; ``[a-b,c]`` ranges keep the
    zero padding of ``a``; several bracket groups multiply. At most
    :data:`MAX_HOSTLIST` names.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import expand_hostlist
    >>> expand_hostlist("tux[0-2,12],node[08-10]")
    ['tux0', 'tux1', 'tux2', 'tux12', 'node08', 'node09', 'node10']
    >>> expand_hostlist("r[1-2]n[1-2]")
    ['r1n1', 'r1n2', 'r2n1', 'r2n2']
    """
    parts: list[str] = []
    depth, start = 0, 0
    for i, ch in enumerate(expr):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(expr[start:i])
            start = i + 1
        if depth not in (0, 1):
            break
    if depth != 0:
        raise RankoptInputError(
            f"hostlist {expr[:80]!r}: unbalanced or nested brackets; expected `name[a-b,c]`."
        )
    parts.append(expr[start:])
    out: list[str] = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        m = re.search(r"\[([^\]]*)\]", part)
        if m is None:
            out.append(part)
            continue
        head, tail = part[: m.start()], part[m.end() :]
        for item in m.group(1).split(","):
            lo, _, hi = item.strip().partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()) or int(hi or lo) < int(lo):
                raise RankoptInputError(
                    f"hostlist {expr!r}: bad range {item!r}; expected `a-b` with a <= b."
                )
            width = len(lo)
            if int(hi or lo) - int(lo) >= MAX_HOSTLIST:
                _too_many(expr)
            for v in range(int(lo), int(hi or lo) + 1):
                out.extend(expand_hostlist(f"{head}{v:0{width}d}{tail}"))
                if len(out) > MAX_HOSTLIST:
                    _too_many(expr)
    return out


def _too_many(expr: str) -> NoReturn:
    raise RankoptInputError(
        f"hostlist {expr[:80]!r}: more than {MAX_HOSTLIST} names; expected a cluster's nodes."
    )


def _claim(owner: dict[str, str], node: str, group: str, source: str, kind: str) -> None:
    """Record ``node`` in ``group``; a node already in another group is an error naming both."""
    other = owner.setdefault(node, group)
    if other != group:
        raise RankoptInputError(
            f"{source}: node {node!r} is under {kind} {other!r} and under {kind} {group!r}; "
            f"expected one {kind} per node."
        )


def _tree_labels(parent: dict[str, str], leaf_of: dict[str, str], source: str) -> TopologyLabels:
    """Labels from a switch tree: each node's leaf switch, then every switch above it."""
    chains: dict[str, list[str]] = {}
    for node, leaf in leaf_of.items():
        chain, seen = [leaf], {leaf}
        while chain[-1] in parent:
            nxt = parent[chain[-1]]
            if nxt in seen:
                raise RankoptInputError(f"{source} topology: switch loop at {nxt!r}.")
            chain.append(nxt)
            seen.add(nxt)
        chains[node] = chain
    depth = max((len(c) for c in chains.values()), default=0)
    notes = []
    if len({len(c) for c in chains.values()}) > 1:
        notes.append("leaf switches at different depths: the shorter chains repeat their top")
    labels = {n: tuple(c + [c[-1]] * (depth - len(c))) for n, c in chains.items()}
    names = tuple(["leaf switch"] + [f"switch level {k}" for k in range(1, depth)])
    return TopologyLabels(source, names, labels, tuple(notes))


def _block_labels(
    blocks: list[tuple[str, list[str]]], sizes: Sequence[int], source: str
) -> TopologyLabels:
    """Labels from topology/block: the base block, then aggregates of consecutive blocks."""
    base = min(sizes) if sizes else 0
    factors = [s // base for s in sorted(sizes)[1:]] if base else []
    labels: dict[str, tuple[str, ...]] = {}
    block_of: dict[str, str] = {}
    for index, (name, nodes) in enumerate(blocks):
        row = [name] + [f"aggregate{f}:{index // f}" for f in factors]
        for node in nodes:
            _claim(block_of, node, name, f"{source} topology", "block")
            labels[node] = tuple(row)
    names = tuple(["block"] + [f"{s}-node block" for s in sorted(sizes)[1:]])
    return TopologyLabels(source, names, labels)


# ---------------------------------------------------------------------- readers
_CONF_PAIR = re.compile(r'([A-Za-z][\w.]*)\s*=\s*(?:"([^"]*)"|(\S+))')


def _conf_records(text: str) -> list[dict[str, str]]:
    """``key=value`` fields of every line (keys lower-cased), as Slurm reads its conf files.

    ``#`` starts a comment, a trailing ``\\`` continues the line, spaces may
    surround ``=``, values may be double-quoted; keys are case-insensitive.
    """
    lines, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw.split("#", 1)[0].rstrip()
        pending = line[:-1] + " " if line.endswith("\\") else ""
        if not pending:
            lines.append(line)
    lines.append(pending)
    records = []
    for line in lines:
        fields = {
            m.group(1).lower(): m.group(2) if m.group(2) is not None else m.group(3)
            for m in _CONF_PAIR.finditer(line)
        }
        if fields:
            records.append(fields)
    return records


def _conf_int(fields: dict[str, str], key: str) -> int:
    value = fields[key]
    if not value.strip().isdigit():
        raise RankoptInputError(f"topology.conf: {key}={value!r}; expected a whole number.")
    return int(value)


def from_slurm_conf(text: str) -> TopologyLabels:
    """``topology.conf`` or ``scontrol show topology`` (tree or block).

    Keys are case-insensitive (``SwitchName``, ``switchname``, ``SWITCHES``),
    spaces may surround ``=`` and a trailing backslash continues a line, as
    in Slurm's own parser.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_slurm_conf
    >>> t = from_slurm_conf('''
    ... SwitchName=s0 Nodes=tux[0-1]
    ... SwitchName=s1 Nodes=tux[2-3]
    ... switchname=top switches=s[0-1]
    ... ''')
    >>> t.labels["tux2"]
    ('s1', 'top')
    >>> from_slurm_conf("BlockName=b1 Nodes=n[1-2]\\nblockname=b2 nodes=n[3-4]\\n"
    ...                 "BLOCKSIZES=2,4\\n").labels["n3"]
    ('b2', 'aggregate2:0')
    """
    parent: dict[str, str] = {}
    switches: list[tuple[str, list[str], bool, int | None]] = []
    blocks: list[tuple[str, list[str]]] = []
    sizes: list[int] = []
    for fields in _conf_records(text):
        if "blocksizes" in fields:
            parts = [x.strip() for x in fields["blocksizes"].split(",") if x.strip()]
            if not all(x.isdigit() for x in parts):
                raise RankoptInputError(
                    f"topology.conf: BlockSizes={fields['blocksizes']!r}; expected whole "
                    "numbers separated by commas."
                )
            sizes = [int(x) for x in parts]
        if "blockname" in fields and "nodes" in fields:
            blocks.append((fields["blockname"], expand_hostlist(fields["nodes"])))
            if "blocksize" in fields and not sizes:
                sizes = [_conf_int(fields, "blocksize")]
        if "switchname" in fields:
            name = fields["switchname"]
            for child in expand_hostlist(fields.get("switches", "")):
                parent[child] = name
            level = _conf_int(fields, "level") if "level" in fields else None
            nodes = expand_hostlist(fields.get("nodes", ""))
            switches.append((name, nodes, bool(fields.get("switches")), level))
    # scontrol lists every node under every switch above it (with Level=): keep level 0's
    leveled = any(level is not None for *_, level in switches)
    leaf_of: dict[str, str] = {}
    for name, nodes, has_switches, level in switches:
        is_leaf = (level or 0) == 0 if leveled else not has_switches
        if is_leaf:
            for node in nodes:
                _claim(leaf_of, node, name, "topology.conf", "leaf switch")
    if leaf_of:
        return _tree_labels(parent, leaf_of, "slurm-tree")
    if blocks:
        return _block_labels(blocks, sizes, "slurm-block")
    if any("ringname" in fields for fields in _conf_records(text)):
        raise RankoptInputError(
            "topology.conf: RingName= (topology/ring) orders nodes in a ring, it has no "
            "groups; expected SwitchName= (tree) or BlockName= (block) lines."
        )
    raise RankoptInputError("no SwitchName= or BlockName= line with Nodes= found.")


def _load_yaml(text: str, what: str = "topology.yaml") -> Any:
    """``yaml.safe_load`` (libyaml's when there), its errors one line naming ``what``."""
    if len(text) > MAX_YAML_CHARS:
        raise RankoptInputError(
            f"{what} has {len(text)} characters; rankopt reads at most {MAX_YAML_CHARS}."
        )
    import yaml  # lazily: start-up time

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # the same safe schema, faster
    try:
        return yaml.load(text, Loader=loader)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        context = ""
        if exc.context:
            context = f" ({exc.context}"
            if exc.context_mark is not None and exc.context_mark is not mark:
                context += f" started at line {exc.context_mark.line + 1}"
            context += ")"
        problem = " ".join(str(exc.problem or "malformed").split())
        raise RankoptInputError(f"{what} is not valid YAML{where}: {problem}{context}.") from None
    except yaml.YAMLError as exc:
        problem = " ".join(str(exc).split())
        raise RankoptInputError(f"{what} is not valid YAML: {problem}.") from None
    except RecursionError:
        raise RankoptInputError(f"{what} is nested too deeply to be a topology.") from None


def _yaml_kind(value: Any) -> str:
    if value is None:
        return "empty"
    if isinstance(value, bool):
        return f"the boolean {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {str(value)[:40]!r}"


def _yaml_name(value: Any, where: str) -> str:
    """A switch or block name: a string or a number."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise RankoptInputError(f"topology.yaml: {where} is {_yaml_kind(value)}; expected a name.")
    return str(value)


def _yaml_hostlist(value: Any, where: str) -> list[str]:
    """``nodes`` / ``children``: a hostlist expression or a list of them; absent: none."""
    if value is None:
        return []
    items = value if isinstance(value, list) else [value]
    out: list[str] = []
    for item in items:
        if isinstance(item, bool) or not isinstance(item, (str, int)):
            raise RankoptInputError(
                f"topology.yaml: {where} holds {_yaml_kind(item)}; expected a hostlist "
                "(`n[1-4]`) or a list of names."
            )
        out.extend(expand_hostlist(str(item)))
    return out


def _yaml_entries(value: Any, where: str) -> list[dict[str, Any]]:
    """A list of mappings (switches, blocks); absent: none."""
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, dict) for v in value):
        raise RankoptInputError(f"topology.yaml: {where} must be a list of mappings.")
    return value


def from_slurm_yaml(text: str) -> TopologyLabels:
    """Slurm ``topology.yaml`` (23.11+): the default topology's tree or blocks.

    The file is read with PyYAML's safe loader (every YAML form: flow and
    block lists, quoting, comments, ``---``); the topology with
    ``cluster_default: true`` is used, else the first. ``nodes`` and
    ``children`` are hostlist expressions or lists of them.

    Raises
    ------
    RankoptInputError
        If the text is not YAML (the message gives the parser's line), is
        longer than :data:`MAX_YAML_CHARS`, or is not a list of topologies.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_slurm_yaml
    >>> t = from_slurm_yaml('''
    ... - topology: fabric
    ...   cluster_default: true
    ...   tree:
    ...     switches:
    ...       - switch: root
    ...         children: s[1-2]
    ...       - switch: s1
    ...         nodes: n[1-2]
    ...       - {switch: s2, nodes: [n3, n4]}
    ... ''')
    >>> t.labels["n3"], t.levels
    (('s2', 'root'), ('leaf switch', 'switch level 1'))
    """
    doc = _load_yaml(text)
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not doc:
        raise RankoptInputError("topology.yaml: expected a list of topologies.")
    if not all(isinstance(t, dict) for t in doc):
        raise RankoptInputError("topology.yaml: a topology must be a mapping.")
    topo = next((t for t in doc if t.get("cluster_default") is True), doc[0])
    name = str(topo.get("topology", "the topology"))[:40]
    if isinstance(topo.get("tree"), dict):
        parent: dict[str, str] = {}
        leaf_of: dict[str, str] = {}
        entries = _yaml_entries(topo["tree"].get("switches"), f"{name}: tree.switches")
        for i, sw in enumerate(entries):
            where = f"{name}: switch {i + 1}"
            if "switch" not in sw:
                raise RankoptInputError(f"topology.yaml: {where} has no `switch` name.")
            switch = _yaml_name(sw["switch"], f"{where} `switch`")
            for child in _yaml_hostlist(sw.get("children"), f"{where} `children`"):
                parent[child] = switch
            for node in _yaml_hostlist(sw.get("nodes"), f"{where} `nodes`"):
                _claim(leaf_of, node, switch, f"topology.yaml: {name}", "leaf switch")
        return _tree_labels(parent, leaf_of, "slurm-tree")
    if isinstance(topo.get("block"), dict):
        spec = topo["block"]
        raw = spec.get("block_sizes")
        items = raw if isinstance(raw, list) else [] if raw is None else str(raw).split(",")
        try:
            sizes = [int(str(s).strip()) for s in items if not isinstance(s, bool)]
        except ValueError:
            sizes = []
        if len(sizes) != len(items) or any(s <= 0 for s in sizes):
            raise RankoptInputError(
                f"topology.yaml: {name}: block_sizes {raw!r}; expected positive whole numbers."
            )
        blocks = []
        for i, b in enumerate(_yaml_entries(spec.get("blocks"), f"{name}: block.blocks")):
            where = f"{name}: block {i + 1}"
            if "block" not in b:
                raise RankoptInputError(f"topology.yaml: {where} has no `block` name.")
            nodes = _yaml_hostlist(b.get("nodes"), f"{where} `nodes`")
            blocks.append((_yaml_name(b["block"], f"{where} `block`"), nodes))
        return _block_labels(blocks, sizes, "slurm-block")
    if topo.get("flat"):
        raise RankoptInputError("topology.yaml: the default topology is flat (no groups).")
    raise RankoptInputError("topology.yaml: the topology has neither `tree` nor `block`.")


def from_slurm_env(text: str) -> TopologyLabels:
    """``host SLURM_TOPOLOGY_ADDR [SLURM_TOPOLOGY_ADDR_PATTERN]`` lines.

    The address lists the switches from the top level down to the node
    (``s0.s3.node07``, pattern ``switch.switch.node``); the node itself is
    not a level.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_slurm_env
    >>> from_slurm_env("n1 top.s1.n1 switch.switch.node\\n").labels["n1"]
    ('s1', 'top')
    """
    labels: dict[str, tuple[str, ...]] = {}
    for raw in text.splitlines():
        parts = raw.split("#", 1)[0].split()
        if not parts:
            continue
        if len(parts) < 2:
            raise RankoptInputError(f"SLURM_TOPOLOGY_ADDR line {raw!r}: expected `host addr`.")
        comps = parts[1].split(".")
        kinds = parts[2].split(".") if len(parts) > 2 else ["switch"] * (len(comps) - 1) + ["node"]
        if len(kinds) != len(comps):
            raise RankoptInputError(
                f"SLURM_TOPOLOGY_ADDR {parts[1]!r} and pattern {parts[2]!r} differ in length."
            )
        switches = [c for c, k in zip(comps, kinds, strict=True) if k == "switch"]
        labels[parts[0]] = tuple(reversed(switches))
    depth = max((len(v) for v in labels.values()), default=0)
    labels = {h: v + (v[-1:] if v else ("",)) * (depth - len(v)) for h, v in labels.items()}
    names = tuple(["leaf switch"] + [f"switch level {k}" for k in range(1, depth)])
    return TopologyLabels("slurm-addr", names, labels)


def from_aws(text: str) -> TopologyLabels:
    """EC2 ``DescribeInstanceTopology`` JSON: ``NetworkNodes`` of each instance.

    ``NetworkNodes`` lists the network nodes from the top layer down; the
    levels are returned bottom first. Keys are instance IDs: the job's host
    names reach them through :func:`from_aws_instances` (``aliases``).

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_aws
    >>> t = from_aws('{"Instances": [{"InstanceId": "i-1", '
    ...              '"NetworkNodes": ["nn-a", "nn-b", "nn-c"]}]}')
    >>> t.labels["i-1"], t.levels
    (('nn-c', 'nn-b', 'nn-a'), ('layer 3', 'layer 2', 'layer 1'))
    """
    doc = _json(text)
    if isinstance(doc, dict) and "Reservations" in doc:
        raise RankoptInputError(
            "this is EC2 DescribeInstances output (no NetworkNodes); expected "
            "DescribeInstanceTopology (give DescribeInstances as the aliases, "
            "--topology-aliases)."
        )
    instances = _json_objects(
        doc.get("Instances") if isinstance(doc, dict) else doc, "Instances", "EC2 topology"
    )
    labels: dict[str, tuple[str, ...]] = {}
    notes = []
    for i, inst in enumerate(instances):
        iid = _json_name(inst, "InstanceId", f"EC2 topology: Instances[{i}]")
        nodes = inst.get("NetworkNodes") or []
        if not nodes:
            notes.append(f"{iid} has no NetworkNodes (unsupported type?)")
            continue
        if not isinstance(nodes, list) or not all(isinstance(x, str) and x for x in nodes):
            raise RankoptInputError(
                f"EC2 topology: NetworkNodes of {iid} is {str(nodes)[:60]!r}; expected a list "
                "of network node IDs."
            )
        row = tuple(reversed(nodes))
        if labels.setdefault(iid, row) != row:
            raise RankoptInputError(
                f"EC2 topology: instance {iid} is listed twice with different NetworkNodes."
            )
    # layer 1 is the top for every instance; a 3-layer instance sits in layer 3, above the
    # 4th layer of 4-layer types: its bottom node stands for it there too (padding below)
    depth = max((len(v) for v in labels.values()), default=0)
    labels = {h: v[:1] * (depth - len(v)) + v for h, v in labels.items()}
    names = tuple(f"layer {k}" for k in range(depth, 0, -1))
    return TopologyLabels("aws", names, labels, tuple(notes))


def from_aws_instances(text: str) -> tuple[tuple[str, str], ...]:
    """Other names of EC2 instances from ``aws ec2 describe-instances`` JSON.

    ``DescribeInstanceTopology`` names instances by ``InstanceId``, while MPI
    and torchrun report a host name (``ip-10-0-0-5.ec2.internal``,
    ``ip-10-0-0-5`` or, with resource-based naming,
    ``i-0abc.us-west-2.compute.internal``) or an address. This reads every
    instance's ``PrivateDnsName``, ``PrivateIpAddress``, public DNS name and
    address, and the private names, addresses and IPv6 addresses of its
    network interfaces. Accepts the whole answer (``{"Reservations":
    [...]}``), a list of reservations or of instances (``--query``).

    Parameters
    ----------
    text : str
        The JSON.

    Returns
    -------
    tuple of (str, str)
        ``(other name, InstanceId)`` pairs, for :attr:`TopologyLabels.aliases`
        (a name two instances share is kept for both: matching it is an error).

    Raises
    ------
    RankoptInputError
        If the JSON holds no instance.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_aws_instances
    >>> from_aws_instances('{"Reservations": [{"Instances": [{"InstanceId": "i-1", '
    ...     '"PrivateDnsName": "ip-10-0-0-5.ec2.internal", "PrivateIpAddress": "10.0.0.5", '
    ...     '"PublicDnsName": ""}]}]}')
    (('ip-10-0-0-5.ec2.internal', 'i-1'), ('10.0.0.5', 'i-1'))
    """
    doc = _json(text)
    pending: list[Any] = [doc]
    instances: list[dict[str, Any]] = []
    while pending:
        item = pending.pop()
        if isinstance(item, list):
            pending.extend(reversed(item))
        elif isinstance(item, dict) and "InstanceId" in item:
            instances.append(item)
        elif isinstance(item, dict):
            pending.extend(reversed([item.get("Reservations"), item.get("Instances")]))
    if not instances:
        raise RankoptInputError(
            "no EC2 instance (InstanceId) found; expected `aws ec2 describe-instances` JSON."
        )
    pairs: dict[tuple[str, str], None] = {}
    for inst in instances:
        iid = str(inst["InstanceId"])
        names = [inst.get(k) for k in _AWS_NAME_KEYS]
        where = f"EC2 instance {iid}"
        for nic in _json_objects(inst.get("NetworkInterfaces"), "NetworkInterfaces", where):
            names += [nic.get("PrivateDnsName"), nic.get("PrivateIpAddress")]
            addrs = _json_objects(nic.get("PrivateIpAddresses"), "PrivateIpAddresses", where)
            names += [a.get("PrivateDnsName") for a in addrs]
            names += [a.get("PrivateIpAddress") for a in addrs]
            v6 = _json_objects(nic.get("Ipv6Addresses"), "Ipv6Addresses", where)
            names += [a.get("Ipv6Address") for a in v6]
            names += [(nic.get("Association") or {}).get(k) for k in ("PublicDnsName", "PublicIp")]
        for name in names:
            if isinstance(name, str) and name and name != iid:
                pairs[(name, iid)] = None
    return tuple(pairs)


_AWS_NAME_KEYS = (
    "PrivateDnsName",
    "PrivateIpAddress",
    "Ipv6Address",
    "PublicDnsName",
    "PublicIpAddress",
)


def _gcp_instances(doc: Any) -> list[Any]:
    """The instances of a gcloud list, an API ``list`` or ``aggregatedList``, or one instance."""
    if isinstance(doc, list):
        return doc
    if not isinstance(doc, dict):
        raise RankoptInputError("GCP instances: expected a JSON list or object.")
    if "items" not in doc:
        return [doc]  # one instance (gcloud compute instances describe)
    items = doc["items"]
    if isinstance(items, list):  # instances.list
        return items
    if isinstance(items, dict):  # instances.aggregatedList: scope -> instances, or a warning
        out: list[Any] = []
        for where, scope in items.items():
            if scope is not None and not isinstance(scope, dict):
                raise RankoptInputError(
                    f"GCP instances: items[{where!r}] is {str(scope)[:40]!r}; expected "
                    "an object with `instances` or a `warning`."
                )
            out.extend(_json_objects((scope or {}).get("instances"), "instances", str(where)))
        return out
    raise RankoptInputError("GCP instances: `items` must be a list or a mapping of zones.")


def from_gcp(text: str) -> TopologyLabels:
    """GCP instances JSON with ``resourceStatus.physicalHostTopology``.

    Accepts one instance, a list (``gcloud compute instances list
    --format=json``), the API's ``instances.list`` (``{"items": [...]}``) or
    ``instances.aggregatedList`` (``{"items": {"zones/ZONE": {"instances":
    [...]}}}``, a zone without instances carrying a ``warning``). Keys are
    instance names (an instance's host name is its name). Levels: host,
    subblock, block, cluster; when no instance has
    ``physicalHostTopology``, ``resourceStatus.physicalHost``
    (``/BLOCK/SUBBLOCK/HOST``) gives host, subblock and block.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_gcp
    >>> t = from_gcp('[{"name": "vm1", "resourceStatus": {"physicalHostTopology": '
    ...              '{"cluster": "c", "block": "b", "subblock": "s", "host": "h"}}}]')
    >>> t.labels["vm1"]
    ('h', 's', 'b', 'c')
    """
    order: tuple[str, ...] = ("host", "subblock", "block", "cluster")
    labels: dict[str, tuple[str, ...]] = {}
    zone_of: dict[str, str] = {}
    notes = []
    instances = _json_objects(_gcp_instances(_json(text)), "instances", "GCP instances")
    status = [inst.get("resourceStatus") or {} for inst in instances]
    for inst, st in zip(instances, status, strict=True):
        if not isinstance(st, dict):
            raise RankoptInputError(
                f"GCP instances: resourceStatus of {inst.get('name')!r} is {str(st)[:40]!r}; "
                "expected an object."
            )
    # older answers (and VMs placed by a compact placement policy) give only physicalHost
    use_path = not any(st.get("physicalHostTopology") for st in status)
    if use_path:
        order = order[:3]
    for i, (inst, st) in enumerate(zip(instances, status, strict=True)):
        name = _json_name(inst, "name", f"GCP instances: instance {i + 1}")
        topo = st.get("physicalHostTopology") or {}
        if use_path and st.get("physicalHost"):
            path = st["physicalHost"]
            parts = path.strip("/").split("/") if isinstance(path, str) else []
            if len(parts) != 3 or not all(parts):
                raise RankoptInputError(
                    f"GCP instances: physicalHost of {name} is {str(path)[:60]!r}; expected "
                    "`/BLOCK/SUBBLOCK/HOST`."
                )
            topo = dict(zip(("block", "subblock", "host"), parts, strict=True))
        if not isinstance(topo, dict):
            raise RankoptInputError(
                f"GCP instances: physicalHostTopology of {name} is {str(topo)[:40]!r}; "
                "expected an object."
            )
        if not topo:
            what = "physicalHost" if use_path else "physicalHostTopology"
            notes.append(f"{name} has no {what}")
            continue
        zone = str(inst.get("zone", "")).rsplit("/", 1)[-1]
        if name in labels and zone_of[name] != zone:
            raise RankoptInputError(
                f"GCP instances: two instances named {name!r} (zones {zone_of[name]!r} and "
                f"{zone!r}); expected one name per host (give one zone's instances)."
            )
        labels[name], zone_of[name] = tuple(str(topo.get(k, "")) for k in order), zone
    return TopologyLabels("gcp", order, labels, tuple(notes))


def from_kubernetes(text: str, keys: Sequence[str] | None = None) -> TopologyLabels:
    """``kubectl get nodes -o json``: the topology labels of every node.

    Parameters
    ----------
    text : str
        The JSON (``{"items": [{"metadata": {"name", "labels"}}]}``).
    keys : sequence of str, optional
        Label keys to use, finest first; default: those of
        :data:`KUBERNETES_KEYS` that some node has.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_kubernetes
    >>> t = from_kubernetes('{"items": [{"metadata": {"name": "n1", "labels": '
    ...     '{"topology.kubernetes.io/zone": "z1", '
    ...     '"cloud.google.com/gce-topology-block": "b7"}}}]}')
    >>> t.levels, t.labels["n1"]
    (('cloud.google.com/gce-topology-block', 'topology.kubernetes.io/zone'), ('b7', 'z1'))
    """
    doc = _json(text)
    if isinstance(doc, dict) and "items" not in doc and "metadata" in doc:
        doc = [doc]  # one node (kubectl get node NAME -o json)
    items = _json_objects(
        doc.get("items") if isinstance(doc, dict) else doc, "items", "Kubernetes nodes"
    )
    nodes: dict[str, dict[str, Any]] = {}
    aliases: dict[tuple[str, str], None] = {}
    for i, item in enumerate(items):
        meta = item.get("metadata")
        if not isinstance(meta, dict):
            raise RankoptInputError(
                f"Kubernetes nodes: items[{i}] has no `metadata` object; expected "
                "`kubectl get nodes -o json`."
            )
        name = _json_name(meta, "name", f"Kubernetes nodes: items[{i}].metadata")
        lab = meta.get("labels") or {}
        if not isinstance(lab, dict):
            raise RankoptInputError(
                f"Kubernetes nodes: labels of node {name} are {str(lab)[:40]!r}; expected an "
                "object."
            )
        nodes[name] = lab
        # the node's addresses: what MPI reports on a host-network pod
        for addr in (item.get("status") or {}).get("addresses") or []:
            value = addr.get("address") if isinstance(addr, dict) else None
            if isinstance(value, str) and value and value != name:
                aliases[(value, name)] = None
    if keys is None:
        present = set().union(*nodes.values()) if nodes else set()
        keys = [k for k in KUBERNETES_KEYS if k in present]
    notes = []
    labels: dict[str, tuple[str, ...]] = {}
    for name, lab in nodes.items():
        row = []
        for k in keys:
            if k not in lab:
                notes.append(f"node {name} has no label {k}")
            row.append(str(lab.get(k, f"?{name}")))
        labels[name] = tuple(row)
    return TopologyLabels("kubernetes", tuple(keys), labels, tuple(notes), tuple(aliases))


def from_text(text: str) -> TopologyLabels:
    """``host rack pod ...`` lines: a host and its groups, finest first.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_text
    >>> from_text("# host rack pod\\nh1 r1 p1\\n").labels
    {'h1': ('r1', 'p1')}
    """
    labels: dict[str, tuple[str, ...]] = {}
    width = None
    for number, raw in enumerate(text.splitlines(), 1):
        parts = raw.split("#", 1)[0].split()
        if not parts:
            continue
        if width is None:
            width = len(parts)
            if width < 2:
                raise RankoptInputError(
                    f"line {number}: {parts[0][:40]!r} alone; a text topology gives each host "
                    "and its groups, finest first: `host rack [pod ...]`."
                )
        if len(parts) != width:
            raise RankoptInputError(
                f"line {number}: {len(parts)} columns, the first line had {width}."
            )
        labels[check_host_name(parts[0], where=f"line {number}")] = tuple(parts[1:])
    if not labels:
        raise RankoptInputError("no `host group ...` lines found.")
    names = tuple(f"level {k}" for k in range(1, (width or 1)))
    return TopologyLabels("text", names, labels)


def read_topology(
    path: str | os.PathLike[str],
    kind: str = "auto",
    *,
    keys: Sequence[str] | None = None,
    aliases: str | os.PathLike[str] | None = None,
) -> TopologyLabels:
    """Read a topology file; ``kind="auto"`` tells the source from the content.

    Parameters
    ----------
    path : path-like
        The file.
    kind : {"auto", "slurm", "slurm-yaml", "slurm-addr", "aws", "gcp", "kubernetes", "text"}
        The source.
    keys : sequence of str, optional
        Kubernetes label keys, finest first.
    aliases : path-like, optional
        EC2 ``describe-instances`` JSON: the instances' private DNS names and
        addresses, so that the job's host names match the instance IDs of a
        ``DescribeInstanceTopology`` file (see :func:`from_aws_instances`).

    Returns
    -------
    TopologyLabels
        With :attr:`TopologyLabels.aliases` from ``aliases``.

    Raises
    ------
    RankoptInputError
        If the file cannot be read as that kind; the message names the file.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> from rankopt.probe.topology_sources import read_topology
    >>> folder = pathlib.Path(tempfile.mkdtemp())
    >>> _ = (folder / "topology.yaml").write_text(
    ...     "- topology: racks\\n  tree:\\n    switches:\\n"
    ...     "      - {switch: s1, nodes: 'node[1-2]'}\\n"
    ...     "      - {switch: s2, nodes: 'node[3-4]'}\\n")
    >>> t = read_topology(folder / "topology.yaml")
    >>> [g.tolist() for g in t.groups(["node1.cluster.local", "node3.cluster.local"])]
    [[0, 1]]
    """
    name = os.fspath(path)
    text = read_text(path, "--topology")
    try:
        if kind == "auto":
            kind = _detect(text)
        readers: dict[str, Any] = {
            "slurm": from_slurm_conf,
            "slurm-yaml": from_slurm_yaml,
            "slurm-addr": from_slurm_env,
            "aws": from_aws,
            "gcp": from_gcp,
            "text": from_text,
        }
        if kind == "kubernetes":
            labels = from_kubernetes(text, keys)
        elif kind in readers:
            labels = readers[kind](text)
        else:
            raise RankoptInputError(
                f"unknown topology kind {kind!r}; expected auto, {', '.join(readers)} or "
                "kubernetes."
            )
    except RankoptInputError as exc:
        raise RankoptInputError(f"{name}: {exc}") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RankoptInputError(f"{name}: not a valid {kind} topology ({exc}).") from None
    if aliases is None:
        return labels
    alias_name = os.fspath(aliases)
    try:
        pairs = from_aws_instances(read_text(aliases, "--topology-aliases"))
    except RankoptInputError as exc:
        raise RankoptInputError(f"{alias_name}: {exc}") from None
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RankoptInputError(
            f"{alias_name}: not valid EC2 describe-instances JSON ({exc})."
        ) from None
    from dataclasses import replace

    return replace(labels, aliases=labels.aliases + pairs)


def _detect(text: str) -> str:
    head = text.lstrip()
    if head.startswith(("{", "[")):
        if '"NetworkNodes"' in text or '"Instances"' in text:
            return "aws"
        if '"physicalHost' in text:
            return "gcp"
        if '"metadata"' in text:
            return "kubernetes"
        if re.search(r'"topology"\s*:', text):
            return "slurm-yaml"  # a topology.yaml written as JSON
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise RankoptInputError(f"not valid JSON ({exc}).") from None
        raise RankoptInputError("JSON that is neither AWS, GCP nor Kubernetes topology.")
    if re.search(r"(?im)^\s*(switchname|blockname|ringname)\s*=", text):
        return "slurm"
    if re.search(r"""(?m)^\s*(-\s*)?\{?\s*["']?topology["']?\s*:""", text):
        return "slurm-yaml"
    first = next((ln.split() for ln in text.splitlines() if ln.split("#")[0].strip()), [])
    if len(first) >= 2 and "." in first[1] and (len(first) == 3 and "node" in first[2]):
        return "slurm-addr"
    if len(first) == 2 and "." in first[1] and first[1].rsplit(".", 1)[1] == first[0].split(".")[0]:
        return "slurm-addr"  # SLURM_TOPOLOGY_ADDR without its pattern: it ends with the node
    return "text"


# ---------------------------------------------------------------------- merge with a probe
def apply_topology(
    network: Any, labels: TopologyLabels, *, aliases: Mapping[str, str] | None = None
) -> Any:
    """The network with the provider's groups; uplinks inferred from its bandwidth.

    Parameters
    ----------
    network : rankopt.Network
        A network with host names (a probe's).
    labels : TopologyLabels
    aliases : mapping, optional
        Other name -> the source's name for it (added to ``labels.aliases``).

    Returns
    -------
    rankopt.Network
        ``network.with_hierarchy(groups)`` with ``provenance["topology"]``
        naming the source, the hosts matched under another name
        (``"matched"``: job host -> source name) and its disagreements with
        the bandwidth.

    Raises
    ------
    RankoptInputError
        If the network has no host names, or a host name is invalid,
        ambiguous or unknown to the source (see :meth:`TopologyLabels.match`).
    """
    from dataclasses import replace

    if network.hosts is None:
        raise RankoptInputError("apply_topology needs a network with host names (a probe's).")
    matched = labels.match(network.hosts, aliases=aliases)
    groups = labels.groups(network.hosts, aliases=aliases)
    out = network.with_hierarchy(groups)
    report = []
    if network.bandwidth is not None:
        report = compare_with_bandwidth(groups, network.bandwidth)
    prov = dict(out.provenance)
    prov["topology"] = {"source": labels.source, "levels": list(labels.levels)}
    prov["topology"]["matched"] = {h: k for h, k in matched.items() if h != k}
    prov["topology"]["disagreements"] = report
    prov["hierarchy"] = f"topology: {labels.source}"
    return replace(out, provenance=prov)


def compare_with_bandwidth(
    groups: Sequence[NDArray[np.int64]],
    bandwidth: NDArray[np.float64],
    *,
    counts: NDArray[np.int64] | None = None,
    gap: float = 1.5,
) -> list[str]:
    """Where measured bandwidth contradicts the groups: members that look far apart.

    For every level above the hosts, the median rate between processes of
    one group (on different hosts) and the median rate between sibling
    groups are compared; an inside pair slower than their geometric mean is
    reported (the probe says the two are in different groups), and so is a
    level whose inside rate is not ``gap`` times the outside one (the level
    does not show in bandwidth -- harmless, but worth knowing).

    Parameters
    ----------
    groups : sequence of ndarray
        Labels per level, hosts first.
    bandwidth : ndarray, shape (n, n)
    counts : ndarray of int, optional
        Measured entries only (``bandwidth_counts > 0``) when given.
    gap : float

    Returns
    -------
    list of str
        One line per finding; empty when they agree.

    Examples
    --------
    >>> import numpy as np
    >>> from rankopt.probe.topology_sources import compare_with_bandwidth
    >>> rack = np.array([0, 0, 1, 1])
    >>> bw = np.where(rack[:, None] == rack[None], 10.0, 1.0)
    >>> compare_with_bandwidth([np.arange(4), rack], bw)
    []
    >>> bw[0, 1] = bw[1, 0] = 1.0
    >>> compare_with_bandwidth([np.arange(4), rack], bw)[0]
    'level 1 group 0: processes 0 and 1 share the group but their bandwidth (1 B/s) is that of different groups (median inside 5.5 B/s, to siblings 1 B/s)'
    """
    bw = np.maximum(bandwidth, bandwidth.T)
    n = bw.shape[0]
    ok = np.ones((n, n), dtype=bool) if counts is None else (counts + counts.T) > 0
    np.fill_diagonal(ok, False)
    found: list[str] = []
    for k in range(1, len(groups)):
        lab = np.asarray(groups[k])
        parent = np.asarray(groups[k + 1]) if k + 1 < len(groups) else np.zeros(n, dtype=int)
        same = lab[:, None] == lab[None, :]
        sibling = ~same & (parent[:, None] == parent[None, :])
        inner, outer = (
            ok & same & (np.asarray(groups[0])[:, None] != groups[0][None, :]),
            ok & sibling,
        )
        if not inner.any() or not outer.any():
            continue
        med_in, med_out = float(np.median(bw[inner])), float(np.median(bw[outer]))
        if med_in < gap * med_out:
            found.append(
                f"level {k}: no bandwidth difference between inside and across groups "
                f"(median {format_rate(med_in)} inside, {format_rate(med_out)} to siblings)"
            )
            continue
        threshold = np.sqrt(med_in * med_out)
        for a, b in zip(*np.nonzero(np.triu(inner & (bw < threshold))), strict=True):
            found.append(
                f"level {k} group {int(lab[a])}: processes {int(a)} and {int(b)} share the "
                f"group but their bandwidth ({format_rate(bw[a, b])}) is that of different groups "
                f"(median inside {format_rate(med_in)}, to siblings {format_rate(med_out)})"
            )
    return found
