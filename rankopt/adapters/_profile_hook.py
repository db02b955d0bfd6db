"""``rankopt profile``'s hook on ``torch.distributed``.

``rankopt profile`` copies this file as ``sitecustomize.py`` into a folder it
puts first on ``PYTHONPATH``; imported under any other name it does nothing.

With ``RANKOPT_PROFILE`` naming a folder, every Python process that imports
``torch.distributed`` records its collective calls -- ``all_reduce``,
``broadcast``, ``reduce``, ``all_gather`` (and ``_into_tensor``),
``reduce_scatter`` (and ``_tensor``), ``all_to_all`` (and ``_single``),
``barrier`` -- as (collective, bytes, group size) classes with a count and,
for synchronous calls, their time, and writes
``<folder>/torch-rank-<rank>.tsv`` at exit (and when the process group is
destroyed). ``DistributedDataParallel`` models that have no communication hook
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


def _note(dist, kind: str, nbytes: int, group, seconds: float) -> None:
    if _STATE["rank"] is None:
        try:
            _STATE["rank"] = int(dist.get_rank())
            _STATE["world"] = int(dist.get_world_size())
            _STATE["backend"] = str(dist.get_backend())
        except Exception:  # noqa: BLE001 - not initialised yet
            pass
    key = (kind, int(nbytes), _group_size(dist, group))
    with _LOCK:
        slot = _COUNTS.setdefault(key, [0, 0.0])
        slot[0] += 1
        slot[1] += seconds


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
            try:
                nbytes = size_of(args, kwargs, _group_size(dist, group))
            except Exception:  # noqa: BLE001 - an unusual signature: count the call only
                nbytes = 0
            _note(dist, kind, nbytes, group, took)
            return out
        finally:
            _LOCAL.inside = False

    wrapper.__wrapped__ = fn  # type: ignore[attr-defined]
    wrapper.__name__ = getattr(fn, "__name__", name)
    wrapper.__doc__ = getattr(fn, "__doc__", None)
    wrapper._rankopt_profile = True  # type: ignore[attr-defined]
    return wrapper


def _patch_distributed(module) -> None:
    import torch.distributed as dist

    c10d = sys.modules.get("torch.distributed.distributed_c10d")
    for name in _CALLS:
        fn = getattr(dist, name, None)
        if fn is None or getattr(fn, "_rankopt_profile", False):
            continue
        wrapped = _wrap(dist, name, fn)
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
    if not rows:
        return
    rank = _STATE["rank"] if _STATE["rank"] is not None else f"pid{os.getpid()}"
    path = os.path.join(_FOLDER, f"torch-rank-{rank}.tsv")
    lines = [
        f"# rankopt profile 1 source=torch world_rank={rank} world_size={_STATE['world']} "
        f"backend={_STATE['backend']}"
    ]
    lines += [f"{k}\t{b}\t{p}\t{int(c)}\t{s:.9g}" for (k, b, p), (c, s) in rows]
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
