"""``rankopt profile``'s hook on ``torch.distributed``.

``rankopt profile`` copies this file as ``sitecustomize.py`` into a folder it
puts first on ``PYTHONPATH``; imported under any other name it does nothing.

With ``RANKOPT_PROFILE`` naming a folder, every Python process that imports
``torch.distributed`` records its collective calls -- ``all_reduce``,
``broadcast``, ``reduce``, ``all_gather`` (and ``_into_tensor``),
``reduce_scatter`` (and ``_tensor``), ``all_to_all`` (and ``_single``),
``barrier`` -- as (collective, bytes, group size) classes with a count and,
for synchronous calls, their time, and its point-to-point traffic -- bytes
and messages per destination global rank of ``send``, ``isend``, the
``isend`` operations of ``batch_isend_irecv``, and of ``all_to_all_single``
with uneven ``input_split_sizes`` and ``all_to_all`` with tensors of
different sizes (those two are recorded as the collective ``alltoallv``) --
and writes ``<folder>/torch-rank-<rank>.tsv`` at exit (and when the process
group is destroyed), the traffic as ``p2p<TAB>src<TAB>dst<TAB>bytes<TAB>messages``
lines. ``DistributedDataParallel`` models that have no communication hook
of their own at their first forward get PyTorch's default ``allreduce_hook``,
which does what DDP does without a hook through ``torch.distributed.all_reduce``,
so every gradient bucket is recorded as an allreduce of its size.

Only the standard library is imported here, and nothing at all without
``RANKOPT_PROFILE``; torch is touched only once the program imports it. A
``sitecustomize`` further down ``sys.path`` still runs.
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import importlib.util
import os
import sys
import threading
import time

_FOLDER = os.environ.get("RANKOPT_PROFILE") or ""
_COUNTS: dict[tuple[str, int, int], list[float]] = {}
_TRAFFIC: dict[int, list[int]] = {}  # destination global rank -> [bytes, messages]
_LOCK = threading.Lock()
_STATE: dict[str, object] = {"rank": None, "world": None, "backend": None}
_LOCAL = threading.local()


def _nbytes(t) -> int:
    try:
        return int(t.numel()) * int(t.element_size())
    except Exception:  # noqa: BLE001 - not a tensor: nothing to count
        return 0


def _group_size(dist, group) -> int:
    try:
        return int(dist.get_world_size(group)) if group is not None else int(dist.get_world_size())
    except Exception:  # noqa: BLE001
        return 0


def _know(dist) -> None:
    if _STATE["rank"] is None:
        try:
            _STATE["rank"] = int(dist.get_rank())
            _STATE["world"] = int(dist.get_world_size())
            _STATE["backend"] = str(dist.get_backend())
        except Exception:  # noqa: BLE001 - not initialised yet
            pass


def _note(dist, kind: str, nbytes: int, group, seconds: float) -> None:
    _know(dist)
    key = (kind, int(nbytes), _group_size(dist, group))
    with _LOCK:
        slot = _COUNTS.setdefault(key, [0, 0.0])
        slot[0] += 1
        slot[1] += seconds


def _sent(dist, dst: int, nbytes: int) -> None:
    """One message of ``nbytes`` to global rank ``dst``."""
    _know(dist)
    if dst == _STATE["rank"]:
        return
    with _LOCK:
        slot = _TRAFFIC.setdefault(int(dst), [0, 0])
        slot[0] += int(nbytes)
        slot[1] += 1


def _global(dist, group, rank: int) -> int:
    """The global rank of ``group``'s rank ``rank``."""
    if group is None or group is getattr(dist.GroupMember, "WORLD", None):
        return int(rank)
    return int(dist.get_global_rank(group, rank))


def _blocks(args, kwargs, name: str, size: int) -> list[int] | None:
    """Bytes of an all-to-all's block for each destination (group rank), when uneven."""
    if name == "all_to_all_single":
        t = _second(args, kwargs, "input")
        splits = args[3] if len(args) > 3 else kwargs.get("input_split_sizes")
        if not splits or t is None or t.dim() == 0 or t.size(0) == 0:
            return None
        row = _nbytes(t) // int(t.size(0))
        per = [int(s) * row for s in splits]
    else:
        per = [_nbytes(t) for t in (_second(args, kwargs, "input_tensor_list") or ())]
    return per if len(set(per)) > 1 and len(per) == size else None


#: Position of the ``group`` argument of the all-to-alls (the others take it by keyword).
_GROUP_AT = {"all_to_all_single": 4, "all_to_all": 2}


# (function name, rankopt collective, bytes of the call from (args, kwargs))
def _first(args, kwargs, name):
    return args[0] if args else kwargs.get(name)


def _second(args, kwargs, name):
    return args[1] if len(args) > 1 else kwargs.get(name)


def _sum(ts) -> int:
    return sum(_nbytes(t) for t in (ts or ()))


_CALLS = {
    "all_reduce": ("allreduce", lambda a, k, p: _nbytes(_first(a, k, "tensor"))),
    "broadcast": ("broadcast", lambda a, k, p: _nbytes(_first(a, k, "tensor"))),
    "reduce": ("reduce", lambda a, k, p: _nbytes(_first(a, k, "tensor"))),
    "all_gather": ("allgather", lambda a, k, p: _nbytes(_second(a, k, "tensor")) * p),
    "all_gather_into_tensor": (
        "allgather",
        lambda a, k, p: _nbytes(_first(a, k, "output_tensor")),
    ),
    "reduce_scatter": ("reduce_scatter", lambda a, k, p: _sum(_second(a, k, "input_list"))),
    "reduce_scatter_tensor": ("reduce_scatter", lambda a, k, p: _nbytes(_second(a, k, "input"))),
    "all_to_all": ("alltoall", lambda a, k, p: _sum(_second(a, k, "input_tensor_list"))),
    "all_to_all_single": ("alltoall", lambda a, k, p: _nbytes(_second(a, k, "input"))),
    "barrier": ("barrier", lambda a, k, p: 0),
}


def _wrap(dist, name: str, fn):
    kind, size_of = _CALLS[name]

    def wrapper(*args, **kwargs):
        if getattr(_LOCAL, "inside", False):  # a collective built from another one
            return fn(*args, **kwargs)
        _LOCAL.inside = True
        try:
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            took = 0.0 if kwargs.get("async_op") else time.perf_counter() - t0
            group = kwargs.get("group")
            if group is None and len(args) > _GROUP_AT.get(name, len(args)):
                group = args[_GROUP_AT[name]]
            size = _group_size(dist, group)
            try:
                nbytes = size_of(args, kwargs, size)
            except Exception:  # noqa: BLE001 - an unusual signature: count the call only
                nbytes = 0
            this = kind
            if name in ("all_to_all", "all_to_all_single"):
                try:
                    per = _blocks(args, kwargs, name, size)
                    if per is not None:  # uneven: traffic, not a priced alltoall
                        this = "alltoallv"
                        for j, b in enumerate(per):
                            if b > 0:
                                _sent(dist, _global(dist, group, j), b)
                except Exception:  # noqa: BLE001 - keep the collective as recorded
                    pass
            _note(dist, this, nbytes, group, took)
            return out
        finally:
            _LOCAL.inside = False

    return _marked(wrapper, fn, name)


def _marked(wrapper, fn, name: str):
    """``wrapper`` dressed as ``fn`` and marked as the recorder's (never wrapped twice)."""
    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(fn, "__name__", name)
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper._rankopt_profile = True  # type: ignore[attr-defined]
    return wrapper


def _send_dst(dist, args, kwargs) -> int:
    """The global destination rank of a ``send``/``isend`` call."""
    group = args[2] if len(args) > 2 else kwargs.get("group")
    group_dst = args[4] if len(args) > 4 else kwargs.get("group_dst")
    if group_dst is not None:
        return _global(dist, group, int(group_dst))
    return int(_second(args, kwargs, "dst"))


def _wrap_p2p(dist, name: str, fn):
    """``send``/``isend`` (one message) and ``batch_isend_irecv`` (its ``isend`` ops)."""

    def wrapper(*args, **kwargs):
        if getattr(_LOCAL, "inside", False):
            return fn(*args, **kwargs)
        _LOCAL.inside = True
        try:
            out = fn(*args, **kwargs)
            try:
                if name == "batch_isend_irecv":
                    for op in _first(args, kwargs, "p2p_op_list") or ():
                        if getattr(op.op, "__name__", "") == "isend":
                            _sent(dist, int(op.peer), _nbytes(op.tensor))
                else:
                    _sent(
                        dist, _send_dst(dist, args, kwargs), _nbytes(_first(args, kwargs, "tensor"))
                    )
            except Exception:  # noqa: BLE001 - an unusual signature: not recorded
                pass
            return out
        finally:
            _LOCAL.inside = False

    return _marked(wrapper, fn, name)


_P2P = ("send", "isend", "batch_isend_irecv")


def _patch_distributed(module) -> None:
    import torch.distributed as dist

    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    for name in (*_CALLS, *_P2P):
        fn = getattr(dist, name, None)
        if fn is None or getattr(fn, "_rankopt_profile", False):
            continue
        wrapped = _wrap_p2p(dist, name, fn) if name in _P2P else _wrap(dist, name, fn)
        setattr(dist, name, wrapped)
        if c10d is not None and getattr(c10d, name, None) is fn:
            setattr(c10d, name, wrapped)
    destroy = getattr(dist, "destroy_process_group", None)
    if destroy is not None and not getattr(destroy, "_rankopt_profile", False):

        def destroy_process_group(*args, **kwargs):
            write()
            return destroy(*args, **kwargs)

        destroy_process_group._rankopt_profile = True  # type: ignore[attr-defined]
        dist.destroy_process_group = destroy_process_group


def _patch_ddp(module) -> None:
    ddp = getattr(module, "DistributedDataParallel", None)
    if ddp is None or getattr(ddp, "_rankopt_profile", False):
        return
    forward, register = ddp.forward, ddp.register_comm_hook
    builtin = getattr(ddp, "_register_builtin_comm_hook", None)

    def register_comm_hook(self, *args, **kwargs):
        self._rankopt_hooked = True
        return register(self, *args, **kwargs)

    def _register_builtin_comm_hook(self, *args, **kwargs):
        self._rankopt_hooked = True
        return builtin(self, *args, **kwargs)

    def ddp_forward(self, *args, **kwargs):
        if not getattr(self, "_rankopt_hooked", False):
            self._rankopt_hooked = True
            try:
                from torch.distributed.algorithms.ddp_comm_hooks import default_hooks

                register(self, self.process_group, default_hooks.allreduce_hook)
            except Exception:  # noqa: BLE001 - keep the model as it is
                pass
        return forward(self, *args, **kwargs)

    ddp.register_comm_hook = register_comm_hook
    if builtin is not None:
        ddp._register_builtin_comm_hook = _register_builtin_comm_hook
    ddp.forward = ddp_forward
    ddp._rankopt_profile = True


_PATCHES = {
    "torch.distributed": _patch_distributed,
    "torch.nn.parallel.distributed": _patch_ddp,
}


class _Finder(importlib.abc.MetaPathFinder):
    """Patch the modules of ``_PATCHES`` right after they are executed."""

    def find_spec(self, name, path, target=None):
        if name not in _PATCHES:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None and spec.loader is not None:
                break
        else:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        class _Loader(importlib.abc.Loader):
            def create_module(self, spec):
                return loader.create_module(spec)

            def exec_module(self, module):
                exec_module(module)
                try:
                    _PATCHES[name](module)
                except Exception as exc:  # noqa: BLE001 - never break the program
                    _warn("rankopt profile: cannot hook %s: %s", name, exc)

        spec.loader = _Loader()
        return spec


def _warn(message: str, *args: object) -> None:
    """A warning through the program's logging (its handlers, else stderr)."""
    import logging

    logging.getLogger("rankopt.profile").warning(message, *args)


def write() -> None:
    """Write this process's classes to ``<folder>/torch-rank-<rank>.tsv``."""
    with _LOCK:
        rows = sorted(_COUNTS.items())
        flows = sorted(_TRAFFIC.items())
    if not rows and not flows:
        return
    rank = _STATE["rank"] if _STATE["rank"] is not None else f"pid{os.getpid()}"
    path = os.path.join(_FOLDER, f"torch-rank-{rank}.tsv")
    lines = [
        f"# rankopt profile 1 source=torch world_rank={rank} world_size={_STATE['world']} "
        f"backend={_STATE['backend']}"
    ]
    lines += [f"{k}\t{b}\t{p}\t{int(c)}\t{s:.9g}" for (k, b, p), (c, s) in rows]
    if isinstance(rank, int):
        lines += [f"p2p\t{rank}\t{d}\t{b}\t{m}" for d, (b, m) in flows]
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        with open(tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(tmp, path)
    except OSError as exc:
        _warn("rankopt profile: cannot write %r: %s", path, exc)


def _chain() -> None:
    """Run the ``sitecustomize`` this one shadows, if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


if __name__ == "sitecustomize" and _FOLDER:
    for _name, _patch in _PATCHES.items():
        if _name in sys.modules:  # imported already (not the usual case)
            _patch(sys.modules[_name])
    sys.meta_path.insert(0, _Finder())
    atexit.register(write)
if __name__ == "sitecustomize":
    _chain()
