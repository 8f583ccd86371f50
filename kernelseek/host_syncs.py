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
- aten ops (a TorchDispatchMode): those attention_hostcost.sync_ops names (_local_scalar_dense, i.e. every
  scalar read; nonzero, masked_select, unique, equal, a tensor built from Python data, repeat_interleave
  with a tensor of repeats; indexing by a boolean mask, a nonzero inside), and repeat_interleave's
  self_Tensor form without output_size.
On CPU, a `.cpu()` or `.tolist()` never reaches aten (nothing to copy), hence the function layer.
Each finding carries the innermost kernelseek frame that made it (file:line), for the report.
"""
from __future__ import annotations

import contextlib
import traceback
from collections import Counter

from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from . import attention_hostcost as H   # which aten ops sync on CUDA: one list (H.SYNC_OPS, H.sync_ops)

SYNC_FUNCS = {"item", "tolist", "numpy", "cpu", "__int__", "__float__", "__bool__", "__index__", "nonzero",
              "masked_select", "unique", "unique_consecutive", "tensor", "as_tensor"}


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
        if not self.rec.paused_now:
            name = func.name().split("::")[-1]
            name = name[:-8] if name.endswith(".default") else name
            if H._base(name) in H.BOOL_INDEXED and H._bool_index(args):
                name += "[bool]"
            tensor_repeats = (H._base(name) == "repeat_interleave" and func._overloadname == "self_Tensor"
                              and kwargs.get("output_size") is None)
            if H.sync_ops(Counter({name: 1})) or tensor_repeats:
                self.rec.found.append((f"aten {name}", _where()))
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
