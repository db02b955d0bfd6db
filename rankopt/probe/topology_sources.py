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
  ``BlockSizes``.
- Slurm ``topology.yaml`` (23.11+): the ``cluster_default`` topology (else
  the first), ``tree.switches`` (``switch``, ``children``, ``nodes``) or
  ``block.blocks`` (``block``, ``nodes``) with ``block.block_sizes``.
- ``SLURM_TOPOLOGY_ADDR`` / ``SLURM_TOPOLOGY_ADDR_PATTERN``: one
  ``host addr [pattern]`` line per host (each process knows only its own;
  gather them), the address being the switches from the top down to the
  node, separated by dots.
- AWS EC2 ``DescribeInstanceTopology`` JSON: ``Instances[].NetworkNodes``
  (top layer first); hosts are instance IDs unless ``aliases`` map them.
- GCP: instances JSON with ``resourceStatus.physicalHostTopology``
  (``host``, ``subblock``, ``block``, ``cluster``).
- Kubernetes ``kubectl get nodes -o json``: node labels; known keys
  (GKE ``cloud.google.com/gce-topology-{host,subblock,block}``, EKS
  ``topology.k8s.aws/network-node-layer-N``, Topograph
  ``network.topology.nvidia.com/{accelerator,leaf,spine,core}``,
  ``topology.kubernetes.io/{zone,region}``) or the ``keys`` given.
- Plain text: ``host rack pod ...`` per line (``#`` comments).

Labels give the groups; the probe gives the capacities: apply_topology
keeps the network's bandwidth and infers each group's uplink from it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from rankopt._validation import RankoptInputError

__all__ = [
    "TopologyLabels",
    "read_topology",
    "from_slurm_conf",
    "from_slurm_yaml",
    "from_slurm_env",
    "from_aws",
    "from_gcp",
    "from_kubernetes",
    "from_text",
    "apply_topology",
    "compare_with_bandwidth",
    "expand_hostlist",
    "KUBERNETES_KEYS",
]

MAX_BYTES = 64 << 20

#: Kubernetes node label keys read by default, finest first.
KUBERNETES_KEYS = (
    "cloud.google.com/gce-topology-host",
    "network.topology.nvidia.com/accelerator",
    "topology.k8s.aws/network-node-layer-4",
    "topology.k8s.aws/network-node-layer-3",
    "topology.k8s.aws/network-node-layer-2",
    "topology.k8s.aws/network-node-layer-1",
    "cloud.google.com/gce-topology-subblock",
    "cloud.google.com/gce-topology-block",
    "network.topology.nvidia.com/leaf",
    "network.topology.nvidia.com/spine",
    "network.topology.nvidia.com/core",
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

    def groups(
        self, hosts: Sequence[str], *, aliases: Mapping[str, str] | None = None
    ) -> list[NDArray[np.int64]]:
        """Nested integer group labels for processes on ``hosts``, hosts first.

        Level 0 labels the hosts; each provider level follows, made nested
        (a group is the tuple of its names on that level and every coarser
        one); levels that split nothing among these hosts are left out.

        Parameters
        ----------
        hosts : sequence of str
            Host of every process.
        aliases : mapping, optional
            Host name -> the name the source uses (an instance ID).

        Returns
        -------
        list of ndarray of int64, shape (n,)

        Raises
        ------
        RankoptInputError
            If the source does not know some host (the first few named).
        """
        from rankopt.probe.hierarchy import host_labels

        aliases = dict(aliases or {})
        keys = [aliases.get(h, h) for h in hosts]
        missing = sorted({k for k in keys if k not in self.labels})
        if missing:
            shown = ", ".join(missing[:5]) + (" ..." if len(missing) > 5 else "")
            raise RankoptInputError(
                f"the {self.source} topology does not name {len(missing)} of the job's hosts: "
                f"{shown}."
            )
        out = [host_labels(hosts)]
        for k in range(len(self.levels)):
            # a group is named by its names on this level and every coarser one: nested
            lab = host_labels(["\x1f".join(self.labels[key][k:]) for key in keys])
            if 1 < int(lab.max()) + 1 < int(out[-1].max()) + 1:
                out.append(lab)
        return out


# ---------------------------------------------------------------------- helpers
def read_text(path: str | os.PathLike[str], what: str) -> str:
    from rankopt._files import open_regular

    with open_regular(path, what=what, max_bytes=MAX_BYTES) as fh:
        return fh.read().decode("utf-8", errors="replace")


def expand_hostlist(expr: str) -> list[str]:
    """Expand a Slurm hostlist expression.

    Commas outside brackets separate names; ``[a-b,c]`` ranges keep the
    zero padding of ``a``; several bracket groups multiply.

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
            lo, _, hi = item.partition("-")
            if not lo.isdigit() or (hi and not hi.isdigit()):
                raise RankoptInputError(f"hostlist {expr!r}: bad range {item!r}.")
            width = len(lo)
            for v in range(int(lo), int(hi or lo) + 1):
                out.extend(expand_hostlist(f"{head}{v:0{width}d}{tail}"))
    return out


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
    for index, (name, nodes) in enumerate(blocks):
        row = [name] + [f"aggregate{f}:{index // f}" for f in factors]
        for node in nodes:
            labels[node] = tuple(row)
    names = tuple(["block"] + [f"{s}-node block" for s in sorted(sizes)[1:]])
    return TopologyLabels(source, names, labels)


# ---------------------------------------------------------------------- readers
def from_slurm_conf(text: str) -> TopologyLabels:
    """``topology.conf`` or ``scontrol show topology`` (tree or block).

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_slurm_conf
    >>> t = from_slurm_conf('''
    ... SwitchName=s0 Nodes=tux[0-1]
    ... SwitchName=s1 Nodes=tux[2-3]
    ... SwitchName=top Switches=s[0-1]
    ... ''')
    >>> t.labels["tux2"]
    ('s1', 'top')
    """
    parent: dict[str, str] = {}
    leaf_of: dict[str, str] = {}
    levels: dict[str, int] = {}
    blocks: list[tuple[str, list[str]]] = []
    sizes: list[int] = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        fields = {}
        for tok in line.split():
            key, eq, value = tok.partition("=")
            if eq:
                fields[key.lower()] = value
        if "blocksizes" in fields:
            sizes = [int(s) for s in fields["blocksizes"].split(",") if s]
        if "blockname" in fields and "nodes" in fields:
            blocks.append((fields["blockname"], expand_hostlist(fields["nodes"])))
            if "blocksize" in fields and not sizes:
                sizes = [int(fields["blocksize"])]
        if "switchname" in fields:
            name = fields["switchname"]
            if "level" in fields:
                levels[name] = int(fields["level"])
            for child in expand_hostlist(fields.get("switches", "")):
                parent[child] = name
            if "nodes" in fields and (not fields.get("switches") or levels.get(name) == 0):
                for node in expand_hostlist(fields["nodes"]):
                    leaf_of.setdefault(node, name)
    if leaf_of:
        # scontrol lists every node under every switch above it: keep the lowest level's
        if levels:
            best: dict[str, str] = {}
            for raw in text.splitlines():
                m = re.search(r"SwitchName=(\S+).*?Nodes=(\S+)", raw, re.IGNORECASE)
                if m and levels.get(m.group(1), 0) == 0:
                    for node in expand_hostlist(m.group(2)):
                        best.setdefault(node, m.group(1))
            leaf_of = best or leaf_of
        return _tree_labels(parent, leaf_of, "slurm-tree")
    if blocks:
        return _block_labels(blocks, sizes, "slurm-block")
    raise RankoptInputError("no SwitchName= or BlockName= line with Nodes= found.")


def _yaml_scalar(text: str) -> Any:
    text = text.strip()
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    if text.startswith("[") and text.endswith("]"):
        return [_yaml_scalar(t) for t in text[1:-1].split(",") if t.strip()]
    if text.lower() in ("true", "false"):
        return text.lower() == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _parse_yaml(text: str) -> Any:
    """The YAML subset of ``topology.yaml``: block mappings, block lists, flow lists."""
    lines = []
    for raw in text.splitlines():
        line = re.sub(r"(^|\s)#.*$", "", raw).rstrip()
        if line.strip() and line.strip() not in ("---", "..."):
            lines.append((len(line) - len(line.lstrip()), line.strip()))
    pos = 0

    def block(indent: int) -> Any:
        nonlocal pos
        if pos >= len(lines):
            return None
        is_list = lines[pos][1].startswith("- ") or lines[pos][1] == "-"
        out: Any = [] if is_list else {}
        while pos < len(lines):
            ind, body = lines[pos]
            if ind < indent:
                break
            if is_list:
                if not (body.startswith("- ") or body == "-") or ind != indent:
                    break
                rest = body[1:].strip()
                if not rest:
                    pos += 1
                    out.append(block(indent + 1))
                elif re.match(r"^[^\s:]+:(\s|$)", rest):
                    # a mapping that starts on the dash line: treat "- " as indentation
                    lines[pos] = (ind + 2, rest)
                    out.append(block(ind + 2))
                else:
                    pos += 1
                    out.append(_yaml_scalar(rest))
            else:
                if ind != indent:
                    break
                key, _, value = body.partition(":")
                pos += 1
                if value.strip():
                    out[key.strip()] = _yaml_scalar(value)
                elif (
                    pos < len(lines)
                    and lines[pos][0] >= indent
                    and (lines[pos][0] > indent or lines[pos][1].startswith("-"))
                ):
                    out[key.strip()] = block(lines[pos][0])
                else:
                    out[key.strip()] = None
        return out

    return block(lines[0][0] if lines else 0)


def from_slurm_yaml(text: str) -> TopologyLabels:
    """Slurm ``topology.yaml`` (23.11+): the default topology's tree or blocks.

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
    ...       - switch: s2
    ...         nodes: n[3-4]
    ... ''')
    >>> t.labels["n3"], t.levels
    (('s2', 'root'), ('leaf switch', 'switch level 1'))
    """
    doc = _parse_yaml(text)
    if isinstance(doc, dict):
        doc = [doc]
    if not isinstance(doc, list) or not doc:
        raise RankoptInputError("topology.yaml: expected a list of topologies.")
    topo = next((t for t in doc if isinstance(t, dict) and t.get("cluster_default")), doc[0])
    if not isinstance(topo, dict):
        raise RankoptInputError("topology.yaml: a topology must be a mapping.")
    if isinstance(topo.get("tree"), dict):
        parent: dict[str, str] = {}
        leaf_of: dict[str, str] = {}
        for sw in topo["tree"].get("switches") or []:
            name = str(sw.get("switch"))
            for child in expand_hostlist(str(sw.get("children") or "")):
                parent[child] = name
            for node in expand_hostlist(str(sw.get("nodes") or "")):
                leaf_of.setdefault(node, name)
        return _tree_labels(parent, leaf_of, "slurm-tree")
    if isinstance(topo.get("block"), dict):
        spec = topo["block"]
        sizes = spec.get("block_sizes") or []
        sizes = [int(s) for s in (sizes if isinstance(sizes, list) else str(sizes).split(","))]
        blocks = [
            (str(b.get("block")), expand_hostlist(str(b.get("nodes") or "")))
            for b in spec.get("blocks") or []
        ]
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
    levels are returned bottom first. Keys are instance IDs.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_aws
    >>> t = from_aws('{"Instances": [{"InstanceId": "i-1", '
    ...              '"NetworkNodes": ["nn-a", "nn-b", "nn-c"]}]}')
    >>> t.labels["i-1"], t.levels
    (('nn-c', 'nn-b', 'nn-a'), ('layer 3', 'layer 2', 'layer 1'))
    """
    doc = json.loads(text)
    instances = doc.get("Instances", []) if isinstance(doc, dict) else doc
    labels: dict[str, tuple[str, ...]] = {}
    notes = []
    for inst in instances:
        nodes = inst.get("NetworkNodes") or []
        if not nodes:
            notes.append(f"{inst.get('InstanceId')} has no NetworkNodes (unsupported type?)")
            continue
        labels[str(inst["InstanceId"])] = tuple(str(x) for x in reversed(nodes))
    depth = max((len(v) for v in labels.values()), default=0)
    labels = {h: v + v[-1:] * (depth - len(v)) for h, v in labels.items()}
    names = tuple(f"layer {k}" for k in range(depth, 0, -1))
    return TopologyLabels("aws", names, labels, tuple(notes))


def from_gcp(text: str) -> TopologyLabels:
    """GCP instances JSON with ``resourceStatus.physicalHostTopology``.

    Accepts one instance, a list (``gcloud compute instances list
    --format=json``) or an API list (``{"items": [...]}``). Keys are instance
    names. Levels: host, subblock, block, cluster.

    Examples
    --------
    >>> from rankopt.probe.topology_sources import from_gcp
    >>> t = from_gcp('[{"name": "vm1", "resourceStatus": {"physicalHostTopology": '
    ...              '{"cluster": "c", "block": "b", "subblock": "s", "host": "h"}}}]')
    >>> t.labels["vm1"]
    ('h', 's', 'b', 'c')
    """
    doc = json.loads(text)
    if isinstance(doc, dict):
        doc = doc.get("items", [doc])
    order = ("host", "subblock", "block", "cluster")
    labels: dict[str, tuple[str, ...]] = {}
    notes = []
    for inst in doc:
        topo = (inst.get("resourceStatus") or {}).get("physicalHostTopology") or {}
        if not topo:
            notes.append(f"{inst.get('name')} has no physicalHostTopology")
            continue
        labels[str(inst["name"])] = tuple(str(topo.get(k, "")) for k in order)
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
    doc = json.loads(text)
    items = doc.get("items", []) if isinstance(doc, dict) else doc
    nodes = {str(it["metadata"]["name"]): dict(it["metadata"].get("labels") or {}) for it in items}
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
    return TopologyLabels("kubernetes", tuple(keys), labels, tuple(notes))


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
        if len(parts) != width:
            raise RankoptInputError(
                f"line {number}: {len(parts)} columns, the first line had {width}."
            )
        labels[parts[0]] = tuple(parts[1:])
    if not labels:
        raise RankoptInputError("no `host group ...` lines found.")
    names = tuple(f"level {k}" for k in range(1, (width or 1)))
    return TopologyLabels("text", names, labels)


def read_topology(
    path: str | os.PathLike[str], kind: str = "auto", *, keys: Sequence[str] | None = None
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

    Returns
    -------
    TopologyLabels

    Raises
    ------
    RankoptInputError
        If the file cannot be read as that kind; the message names the file.
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
            return from_kubernetes(text, keys)
        if kind not in readers:
            raise RankoptInputError(f"unknown topology kind {kind!r}.")
        return readers[kind](text)  # type: ignore[no-any-return]
    except (json.JSONDecodeError, KeyError, TypeError, AttributeError, ValueError) as exc:
        raise RankoptInputError(f"{name}: not a valid {kind} topology ({exc}).") from None


def _detect(text: str) -> str:
    head = text.lstrip()
    if head.startswith(("{", "[")):
        if '"NetworkNodes"' in text or '"Instances"' in text:
            return "aws"
        if "physicalHostTopology" in text:
            return "gcp"
        if '"metadata"' in text:
            return "kubernetes"
        raise RankoptInputError("JSON that is neither AWS, GCP nor Kubernetes topology.")
    if re.search(r"(?im)^\s*(switchname|blockname)\s*=", text):
        return "slurm"
    if re.search(r"(?m)^\s*-?\s*topology\s*:", text):
        return "slurm-yaml"
    first = next((ln.split() for ln in text.splitlines() if ln.split("#")[0].strip()), [])
    if len(first) >= 2 and "." in first[1] and (len(first) == 3 and "node" in first[2]):
        return "slurm-addr"
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
        Host name -> the source's name for it.

    Returns
    -------
    rankopt.Network
        ``network.with_hierarchy(groups)`` with ``provenance["topology"]``
        naming the source and its disagreements with the bandwidth.

    Raises
    ------
    RankoptInputError
        If the network has no host names or the source misses a host.
    """
    from dataclasses import replace

    if network.hosts is None:
        raise RankoptInputError("apply_topology needs a network with host names (a probe's).")
    groups = labels.groups(network.hosts, aliases=aliases)
    out = network.with_hierarchy(groups)
    report = []
    if network.bandwidth is not None:
        report = compare_with_bandwidth(groups, network.bandwidth)
    prov = dict(out.provenance)
    prov["topology"] = {"source": labels.source, "levels": list(labels.levels)}
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
                f"(median {_rate(med_in)} inside, {_rate(med_out)} to siblings)"
            )
            continue
        threshold = np.sqrt(med_in * med_out)
        for a, b in zip(*np.nonzero(np.triu(inner & (bw < threshold))), strict=True):
            found.append(
                f"level {k} group {int(lab[a])}: processes {int(a)} and {int(b)} share the "
                f"group but their bandwidth ({_rate(bw[a, b])}) is that of different groups "
                f"(median inside {_rate(med_in)}, to siblings {_rate(med_out)})"
            )
    return found


def _rate(x: float) -> str:
    for unit, scale in (("GB/s", 1e9), ("MB/s", 1e6), ("kB/s", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g} {unit}"
    return f"{x:.3g} B/s"
