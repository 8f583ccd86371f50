"""The ctypes mirror of kernels/kseek.h, and launching a built kernel on torch tensors.

    lib = load(so_path)                              # KernelLib: fwd, workspace_bytes, name
    launch(lib, scenario, inputs, o, lse)            # one call on the current stream; LaunchError if not ok
    call = Launch(lib, scenario, inputs, o, lse)     # params and workspace once, then call() per launch

The one launch path: the worker (checked and timed calls), the `original:` baseline and
kernelseek.attention all go through `Launch`, so each gets the same params, the same workspace rule
(`workspace_for`: what kseek_workspace_bytes asks, at least MIN_WORKSPACE_BYTES, never NULL) and the
same errors (a status other than KSEEK_OK raises LaunchError naming the status; Unsupported,
also a NotImplementedError, for KSEEK_ERR_UNSUPPORTED).

`KseekParams` lists the fields of `kseek_params` in the header's order with the same C types
(pointers as c_void_p: same size and alignment as any data pointer); tests/unit/test_abi.py
compiles the header and compares every offset. `make_params` derives the layout (dense, varlen,
paged) from the tensors' shapes and takes strides in elements from the tensors themselves, so a
non-contiguous view is described correctly; only the last dimension must be contiguous.
"""
from __future__ import annotations

import ctypes
from ctypes import c_float, c_int32, c_int64, c_size_t, c_void_p
from pathlib import Path
from typing import Any

ABI_VERSION = 3                                    # 3: attention_chunk appended
BF16, FP16, FP8_E4M3 = 0, 1, 2                     # enum kseek_dtype
STATUS = {0: "ok", 1: "unsupported", 2: "invalid", 3: "cuda error", 4: "workspace too small", 5: "abi mismatch"}
OK, ERR_UNSUPPORTED = 0, 1
# Every call gets a workspace of at least this many bytes, even when the kernel asks for none: the
# pointer is never NULL (torch.empty(0) may give address 0), and the API, the baselines and the worker
# all make the call the worker checked. 16 bytes: one aligned vector, a flag or a counter's worth.
MIN_WORKSPACE_BYTES = 16


class LaunchError(RuntimeError):
    """kseek_fwd returned a status other than KSEEK_OK; `code` is it and `status` its name."""

    def __init__(self, code: int, context: str = ""):
        self.code, self.status = int(code), STATUS.get(int(code), "unknown status")
        super().__init__(f"kernel returned status {self.code} ({self.status})" + (f" {context}" if context else ""))


class Unsupported(LaunchError, NotImplementedError):
    """KSEEK_ERR_UNSUPPORTED: a feature combination the kernel does not implement (never a wrong answer)."""


def raise_for_status(code: int, context: str = "") -> None:
    """Nothing for KSEEK_OK; else Unsupported or LaunchError naming the status."""
    if code != OK:
        raise (Unsupported if code == ERR_UNSUPPORTED else LaunchError)(code, context)


class KseekParams(ctypes.Structure):
    """struct kseek_params, field for field (see kernels/kseek.h for meanings)."""
    _fields_ = [
        ("abi_version", c_int32), ("dtype", c_int32), ("out_dtype", c_int32), ("batch", c_int32),
        ("seqlen_q", c_int32), ("seqlen_k", c_int32), ("heads_q", c_int32), ("heads_kv", c_int32),
        ("head_dim", c_int32), ("head_dim_v", c_int32),
        ("q", c_void_p), ("k", c_void_p), ("v", c_void_p), ("o", c_void_p), ("lse", c_void_p),
        ("q_batch_stride", c_int64), ("q_row_stride", c_int64), ("q_head_stride", c_int64),
        ("k_batch_stride", c_int64), ("k_row_stride", c_int64), ("k_head_stride", c_int64),
        ("v_batch_stride", c_int64), ("v_row_stride", c_int64), ("v_head_stride", c_int64),
        ("o_batch_stride", c_int64), ("o_row_stride", c_int64), ("o_head_stride", c_int64),
        ("lse_batch_stride", c_int64), ("lse_head_stride", c_int64),
        ("cu_seqlens_q", c_void_p), ("cu_seqlens_k", c_void_p), ("seqused_k", c_void_p),
        ("leftpad_k", c_void_p), ("page_table", c_void_p),
        ("page_table_stride", c_int32), ("page_size", c_int32), ("num_pages", c_int32),
        ("causal", c_int32), ("window_left", c_int32), ("window_right", c_int32),
        ("softcap", c_float), ("scale", c_float), ("sinks", c_void_p),
        ("q_descale", c_void_p), ("k_descale", c_void_p), ("v_descale", c_void_p),
        ("descale_batch_stride", c_int64),
        ("num_splits", c_int32), ("_pad", c_int32), ("workspace", c_void_p), ("workspace_bytes", c_size_t),
        ("total_q", c_int64), ("total_k", c_int64),
        ("attention_chunk", c_int32), ("_pad2", c_int32),
    ]

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name, _ in self._fields_}


_P = ctypes.POINTER(KseekParams)


PATH_NAMES = {0: "naive", 1: "decode", 2: "prefill", 3: "prefill_fp8", 4: "mixed", 5: "gather",
              6: "mixed_gather"}  # fa3_hopper's codes; 4: decode + prefill; 6: 4 over dense slots (a variant)


class KernelLib:
    """A loaded kernel library: fwd(params, stream) -> status, workspace_bytes(params), name()."""

    def __init__(self, so_path: str | Path):
        self.path = Path(so_path)
        self.dll = ctypes.CDLL(str(self.path))
        try:
            self._fwd = self.dll.kseek_fwd
        except AttributeError:
            raise AttributeError(f"{self.path}: does not define kseek_fwd (see kernels/kseek.h)") from None
        self._fwd.argtypes, self._fwd.restype = [_P, c_void_p], ctypes.c_int
        self._ws = getattr(self.dll, "kseek_workspace_bytes", None)
        if self._ws is not None:
            self._ws.argtypes, self._ws.restype = [_P], c_size_t
        self._name = getattr(self.dll, "kseek_name", None)
        if self._name is not None:
            self._name.argtypes, self._name.restype = [], ctypes.c_char_p
        self._path = getattr(self.dll, "kseek_last_path", None)
        if self._path is not None:
            self._path.argtypes, self._path.restype = [], ctypes.c_int

    def fwd(self, params: KseekParams, stream: int | None = 0) -> int:
        """Launch on `stream` (a cudaStream_t as an int; 0 = the legacy default stream)."""
        return int(self._fwd(ctypes.byref(params), c_void_p(stream or None)))

    def workspace_bytes(self, params: KseekParams) -> int:
        return int(self._ws(ctypes.byref(params))) if self._ws is not None else 0

    def last_path(self) -> str | None:
        """The kernel's word on which path its last kseek_fwd took (kseek.h's optional kseek_last_path,
        fa3_hopper's codes as PATH_NAMES; another code as "code N"); None when it does not say."""
        if self._path is None:
            return None
        code = int(self._path())
        return PATH_NAMES.get(code, f"code {code}") if code >= 0 else None

    def name(self) -> str:
        raw = self._name() if self._name is not None else None
        return raw.decode(errors="replace") if raw else self.path.stem


def load(so_path: str | Path) -> KernelLib:
    return KernelLib(so_path)


# ---- tensors -> params ---------------------------------------------------------------------------
_DTYPE_CODES: dict = {}


def dtype_code(dt) -> int:
    if not _DTYPE_CODES:                             # filled once: torch is imported lazily here
        import torch
        _DTYPE_CODES.update({torch.bfloat16: BF16, torch.float16: FP16})
        if hasattr(torch, "float8_e4m3fn"):
            _DTYPE_CODES[torch.float8_e4m3fn] = FP8_E4M3
    code = _DTYPE_CODES.get(dt)
    if code is None:
        raise ValueError(f"dtype {dt} has no kseek_dtype (bf16, fp16, float8_e4m3fn)")
    return code


def _ptr(t) -> int | None:
    return None if t is None else t.data_ptr()


def _strides(t, name: str, dims: int) -> tuple[int, int, int]:
    """(batch, row, head) strides in elements of a [B, S, H, D] (dims=4) or [total, H, D] (dims=3)
    tensor; varlen has no batch stride (0)."""
    st = t.stride()                                  # one call: this runs 4 times per kernel call
    if len(st) != dims:
        raise ValueError(f"{name}: expected {dims} dims, got shape {tuple(t.shape)}")
    if st[-1] != 1:
        raise ValueError(f"{name}: the last dimension must be contiguous (stride {st[-1]})")
    return st[:3] if dims == 4 else (0, st[0], st[1])


def make_params(s, inp, o, lse, workspace=None) -> KseekParams:
    """kseek_params for scenario `s` on Inputs `inp`, output `o` and LSE `lse` (None: no LSE).

    Layouts (kernels/kseek.h): q 4-D = dense, 3-D = varlen (cu_seqlens_q); k 4-D with a page
    table = paged [num_pages, page_size, Hkv, D], 3-D = varlen; o like q; lse [B, Hq, Sq] or
    varlen [Hq, total_q]. Heads and head dims come from the tensors and must match `s`.
    """
    import torch
    q, k, v = inp.q, inp.k, inp.v
    varlen_q = q.dim() == 3
    paged = inp.page_table is not None
    varlen_k = k.dim() == 3
    if varlen_q and inp.cu_seqlens_q is None:
        raise ValueError("q is packed [total, H, D] but cu_seqlens_q is None")
    if varlen_k and (inp.cu_seqlens_k is None or paged):
        raise ValueError("k is packed [total, H, D]: needs cu_seqlens_k and no page table")
    p = KseekParams()
    p.abi_version = ABI_VERSION
    p.dtype, p.out_dtype = dtype_code(q.dtype), dtype_code(o.dtype)
    for name, t in (("k", k), ("v", v)):
        if t.dtype != q.dtype:
            raise ValueError(f"{name} is {t.dtype} but q is {q.dtype}")
    p.batch = s.n_batch
    p.heads_q, p.head_dim = q.shape[-2], q.shape[-1]
    p.heads_kv, p.head_dim_v = k.shape[-2], v.shape[-1]
    if (p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v) != (s.heads_q, s.heads_kv, s.head_dim, s.dv):
        raise ValueError(f"tensor heads/dims {(p.heads_q, p.heads_kv, p.head_dim, p.head_dim_v)} do not "
                         f"match scenario {s.name} {(s.heads_q, s.heads_kv, s.head_dim, s.dv)}")
    p.seqlen_q = max(s.q_lens())
    if paged:
        pages_per_seq, page_size = inp.page_table.shape[1], k.shape[1]
        p.seqlen_k = pages_per_seq * page_size          # the header's "max pages per seq * page_size"
        if inp.seqused_k is None and inp.cu_seqlens_k is None and p.seqlen_k != max(s.k_capacity()):
            raise ValueError(f"paged: {pages_per_seq} pages of {page_size} hold {p.seqlen_k} keys but the "
                             f"scenario has {max(s.k_capacity())}: give seqused_k")
        p.page_table, p.page_table_stride = inp.page_table.data_ptr(), inp.page_table.stride(0)
        p.page_size, p.num_pages = page_size, k.shape[0]
    else:
        p.seqlen_k = max(s.k_capacity())

    p.q, p.k, p.v, p.o, p.lse = q.data_ptr(), k.data_ptr(), v.data_ptr(), o.data_ptr(), _ptr(lse)
    p.q_batch_stride, p.q_row_stride, p.q_head_stride = _strides(q, "q", 3 if varlen_q else 4)
    p.k_batch_stride, p.k_row_stride, p.k_head_stride = _strides(k, "k", 3 if varlen_k else 4)
    p.v_batch_stride, p.v_row_stride, p.v_head_stride = _strides(v, "v", 3 if varlen_k else 4)
    p.o_batch_stride, p.o_row_stride, p.o_head_stride = _strides(o, "o", 3 if varlen_q else 4)
    if lse is not None:
        if lse.dtype != torch.float32 or lse.stride(-1) != 1:
            raise ValueError("lse must be float32 with a contiguous last dimension")
        if varlen_q:
            p.lse_batch_stride, p.lse_head_stride = 0, lse.stride(0)     # [Hq, total_q]
        else:
            p.lse_batch_stride, p.lse_head_stride = lse.stride(0), lse.stride(1)  # [B, Hq, Sq]

    p.cu_seqlens_q, p.cu_seqlens_k = _ptr(inp.cu_seqlens_q), _ptr(inp.cu_seqlens_k)
    p.total_q = q.shape[0] if varlen_q else 0          # packed rows (ABI 2): no host read of cu_seqlens
    p.total_k = k.shape[0] if varlen_k else 0
    p.seqused_k, p.leftpad_k = _ptr(inp.seqused_k), _ptr(inp.leftpad_k)

    p.causal = int(s.causal)
    p.window_left, p.window_right = s.effective_window     # causal folded in as right = 0
    p.softcap, p.scale = float(s.softcap), float(s.softmax_scale)
    p.sinks = _ptr(inp.sinks)
    p.q_descale, p.k_descale, p.v_descale = _ptr(inp.q_descale), _ptr(inp.k_descale), _ptr(inp.v_descale)
    ds = {d.stride(0) for d in (inp.q_descale, inp.k_descale, inp.v_descale) if d is not None}
    if len(ds) > 1:
        raise ValueError(f"q/k/v descales have different batch strides {sorted(ds)}")
    p.descale_batch_stride = ds.pop() if ds else 0
    p.num_splits = s.num_splits
    p.attention_chunk = int(getattr(s, "attention_chunk", 0) or 0)   # ABI 3; 0 = off
    if workspace is not None:
        set_workspace(p, workspace)
    return p


def set_workspace(p: KseekParams, workspace) -> None:
    """Point params at `workspace` (a tensor): its address and size in bytes."""
    p.workspace, p.workspace_bytes = workspace.data_ptr(), workspace.numel() * workspace.element_size()


# ---- launching -----------------------------------------------------------------------------------
def workspace_for(lib: KernelLib, s, inp, o, lse):
    """The workspace for this call: kseek_workspace_bytes(params) bytes, at least MIN_WORKSPACE_BYTES,
    uint8 on o's device."""
    return _workspace(lib, make_params(s, inp, o, lse), o.device)


def _workspace(lib: KernelLib, params: KseekParams, device):
    """kseek_workspace_bytes(params) bytes (at least MIN_WORKSPACE_BYTES) of uint8 on `device`;
    params must not point at a workspace yet (the kernel sizes it from the rest)."""
    import torch
    n = lib.workspace_bytes(params)
    return torch.empty(max(int(n), MIN_WORKSPACE_BYTES), dtype=torch.uint8, device=device)


class Launch:
    """One kernel call bound to its tensors: params filled once (kseek_workspace_bytes reads them
    before the workspace is set, as workspace_for's do), workspace sized once; calling launches.

    `stream` is a cudaStream_t as an int (None: o's device's current stream, read now: timing calls
    it in a loop and must not pay for the lookup each time). The object keeps the inputs, outputs
    and workspace alive, since the params hold raw pointers into them."""

    def __init__(self, lib: KernelLib, s, inp, o, lse, stream: int | None = None, workspace=None):
        self.lib, self.inp, self.o, self.lse = lib, inp, o, lse
        self.params = make_params(s, inp, o, lse)     # one struct: sized for the workspace, then pointed at it
        self.workspace = workspace if workspace is not None else _workspace(lib, self.params, o.device)
        set_workspace(self.params, self.workspace)
        if stream is None:
            import torch
            stream = torch.cuda.current_stream(o.device).cuda_stream
        self.stream = stream

    def status(self) -> int:
        """Launch once; the kernel's status code, unchecked."""
        return self.lib.fwd(self.params, self.stream)

    def __call__(self, context: str = ""):
        """Launch once; (o, lse), or LaunchError naming the status (`context` is added to its message)."""
        raise_for_status(self.status(), context)
        return self.o, self.lse


def launch(lib: KernelLib, s, inp, o, lse, stream: int | None = None, workspace=None) -> Launch:
    """Launch once (see Launch); returns the Launch, to call again. Raises LaunchError if not ok."""
    call = Launch(lib, s, inp, o, lse, stream, workspace)
    call()
    return call
