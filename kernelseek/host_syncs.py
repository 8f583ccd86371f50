"""Find host syncs in torch code without a GPU: record the calls that would read a device value back.

    with SyncRecorder() as rec:
        plan_something(cpu_tensors)
        with rec.paused():            # a region that may sync (a CPU-only reference answer)
            ...
    assert not rec.found, rec.report()

On CUDA tensors these block the host until the device catches up (and break CUDA-graph capture); on CPU
tensors they run silently, so a test on CPU catches them only by recording them. Two layers:
- torch functions (a TorchFunctionMode): Tensor.item / tolist / numpy / cpu, int() / float() / bool() /
  index() of a tensor, nonzero, masked_select, unique, and torch.tensor / as_tensor (host data copied to
  the device: a host->device copy per call);
- aten ops (a TorchDispatchMode): _local_scalar_dense (every scalar read), nonzero, masked_select,
  unique, repeat_interleave with a tensor of repeats and no output_size, equal, is_nonzero, allclose,
  and indexing by a boolean mask (index / index_put with a bool index tensor: a nonzero inside).
On CPU, a `.cpu()` or `.tolist()` never reaches aten (nothing to copy), hence the function layer.
Each finding carries the innermost kernelseek frame that made it (file:line), for the report.
"""
from __future__ import annotations

import contextlib
import traceback

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

SYNC_FUNCS = {"item", "tolist", "numpy", "cpu", "__int__", "__float__", "__bool__", "__index__", "nonzero",
              "masked_select", "unique", "unique_consecutive", "tensor", "as_tensor"}
SYNC_OPS = {"_local_scalar_dense", "nonzero", "masked_select", "unique", "_unique", "_unique2", "unique_dim",
            "unique_consecutive", "equal", "is_nonzero", "allclose"}
BOOL_INDEX_OPS = {"index", "index_put", "index_put_", "_index_put_impl_"}


def _where() -> str:
    """The innermost frame in kernelseek (not this module), else the innermost outside torch."""
    frames = traceback.extract_stack()[:-3]
    for f in reversed(frames):
        if "/kernelseek/" in f.filename and not f.filename.endswith("host_syncs.py"):
            return f"{f.filename.split('/kernelseek/')[-1]}:{f.lineno} ({f.name})"
    for f in reversed(frames):
        if "/torch/" not in f.filename and not f.filename.endswith("host_syncs.py"):
            return f"{f.filename}:{f.lineno} ({f.name})"
    return "?"


def _has_bool_index(args) -> bool:
    idx = args[1] if len(args) > 1 else None
    return isinstance(idx, (list, tuple)) and any(isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in idx)


class _Funcs(TorchFunctionMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in SYNC_FUNCS and not self.rec.paused_now:
            self.rec.found.append((f"torch function {name}", _where()))
        return func(*args, **(kwargs or {}))


class _Ops(TorchDispatchMode):
    def __init__(self, rec):
        super().__init__()
        self.rec = rec

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        base = func._schema.name.split("::")[-1]
        hit = base in SYNC_OPS
        hit = hit or (base == "repeat_interleave" and func._overloadname in ("Tensor", "self_Tensor")
                      and kwargs.get("output_size") is None)
        hit = hit or (base in BOOL_INDEX_OPS and _has_bool_index(args))
        if hit and not self.rec.paused_now:
            self.rec.found.append((f"aten {func}", _where()))
        return func(*args, **kwargs)


class SyncRecorder:
    """Records would-be host syncs (module docstring) between __enter__ and __exit__; `paused()` skips a region."""

    def __init__(self):
        self.found: list[tuple[str, str]] = []
        self.paused_now = False
        self._stack = contextlib.ExitStack()

    def __enter__(self):
        self._stack.enter_context(_Funcs(self))
        self._stack.enter_context(_Ops(self))
        return self

    def __exit__(self, *exc):
        return self._stack.__exit__(*exc)

    @contextlib.contextmanager
    def paused(self):
        was, self.paused_now = self.paused_now, True
        try:
            yield
        finally:
            self.paused_now = was

    def report(self) -> str:
        return "\n".join(f"{what} at {where}" for what, where in self.found) or "no host syncs"
