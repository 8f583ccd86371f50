"""The ctypes mirror of kseek_params against the real header, compiled (no GPU needed).

A probe library is built from kernels/kseek.h with nvcc (host code only). It reports offsetof and
sizeof of every field, and its kseek_fwd prints every field by name (so a misplaced ctypes field
shows up as a wrong value) and copies q[..., 0] to o[..., 0] and a known value into each LSE slot
through the strides it was given, on CPU tensors: the layout is proven end to end through ctypes.
"""
from __future__ import annotations

import ctypes
import re
import subprocess
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from kernelseek import abi
from kernelseek.build import REPO_KERNELS, find_nvcc
from kernelseek.scenarios import Scenario

HEADER = REPO_KERNELS / "kseek.h"


def header_fields() -> list[tuple[str, str]]:
    """(C type, name) of every kseek_params field, in order, read from the header text."""
    text = HEADER.read_text()
    body = re.search(r"typedef struct kseek_params \{(.*?)\} kseek_params;", text, re.S).group(1)
    body = re.sub(r"//[^\n]*", "", body)
    fields = []
    for decl in filter(None, (d.strip() for d in body.split(";"))):
        m = re.fullmatch(r"((?:const\s+)?\w+\s*\*?)\s*(.+)", decl, re.S)
        ctype, names = m.group(1).strip(), m.group(2)
        for name in names.split(","):
            name = name.strip()
            star = name.startswith("*")
            fields.append((ctype + ("*" if star else ""), name.lstrip("*").strip()))
    return fields


PROBE = r"""
#include <stdio.h>
#include <stddef.h>
#include <string.h>
#include "kseek.h"
static char g_dump[8192];
static void* g_stream;
extern "C" const char* probe_offsets(void) {
  static char buf[8192]; int n = 0;
  n += snprintf(buf + n, sizeof buf - n, "sizeof %zu\n", sizeof(kseek_params));
  OFFSETS
  return buf;
}
extern "C" const char* probe_dump(void) { return g_dump; }
extern "C" void* probe_stream(void) { return g_stream; }
extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  int n = 0; char* buf = g_dump; size_t cap = sizeof g_dump;
  DUMP
  g_stream = (void*)stream;
  // o[..., 0] = q[..., 0] (16-bit copy) and lse = 1000 b + 100 h + i, through the given strides.
  const unsigned short* q = (const unsigned short*)p->q;
  unsigned short* o = (unsigned short*)p->o;
  for (int b = 0; b < p->batch; ++b) {
    long long r0 = p->cu_seqlens_q ? p->cu_seqlens_q[b] : 0;
    int sq = p->cu_seqlens_q ? p->cu_seqlens_q[b + 1] - p->cu_seqlens_q[b] : p->seqlen_q;
    long long bq = p->cu_seqlens_q ? 0 : b;
    for (int i = 0; i < sq; ++i)
      for (int h = 0; h < p->heads_q; ++h) {
        long long row = r0 + i;
        o[bq * p->o_batch_stride + row * p->o_row_stride + h * p->o_head_stride] =
            q[bq * p->q_batch_stride + row * p->q_row_stride + h * p->q_head_stride];
        if (p->lse) p->lse[bq * p->lse_batch_stride + h * p->lse_head_stride + row] = 1000.f * b + 100.f * h + i;
      }
  }
  return p->num_splits;   // any int: proves the status code comes back unchanged
}
extern "C" size_t kseek_workspace_bytes(const kseek_params* p) { return 1000u * p->heads_q + p->head_dim; }
extern "C" const char* kseek_name(void) { return "abi_probe"; }
"""


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> abi.KernelLib:
    offs, dump = [], []
    for ctype, name in header_fields():
        offs.append(f'n += snprintf(buf + n, sizeof buf - n, "{name} %zu %zu\\n", offsetof(kseek_params, {name}), sizeof(((kseek_params*)0)->{name}));')
        if "*" in ctype:
            fmt, val = "%llu", f"(unsigned long long)(size_t)p->{name}"
        elif ctype == "float":
            fmt, val = "%.9g", f"(double)p->{name}"
        else:
            fmt, val = "%lld", f"(long long)p->{name}"
        dump.append(f'n += snprintf(buf + n, cap - n, "{name} {fmt}\\n", {val});')
    d = tmp_path_factory.mktemp("abi_probe")
    src = d / "probe.cu"
    src.write_text(PROBE.replace("OFFSETS", "\n  ".join(offs)).replace("DUMP", "\n  ".join(dump)))
    so = d / "probe.so"
    r = subprocess.run([find_nvcc(), "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", f"-I{REPO_KERNELS}",
                        str(src), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    lib = abi.load(so)
    for fn in ("probe_offsets", "probe_dump"):
        getattr(lib.dll, fn).restype = ctypes.c_char_p
    lib.dll.probe_stream.restype = ctypes.c_void_p
    return lib


def _lines(raw: bytes) -> dict[str, list[str]]:
    return {ln.split()[0]: ln.split()[1:] for ln in raw.decode().splitlines()}


def test_fields_match_header_order_and_names():
    assert [n for _, n in header_fields()] == [n for n, _ in abi.KseekParams._fields_]


def test_offsets_and_sizes_match_compiled_header(probe):
    c = _lines(probe.dll.probe_offsets())
    assert int(c.pop("sizeof")[0]) == ctypes.sizeof(abi.KseekParams)
    for name, _ in abi.KseekParams._fields_:
        off, size = map(int, c[name])
        field = getattr(abi.KseekParams, name)
        assert (field.offset, field.size) == (off, size), name


def test_constants_match_header():
    text = HEADER.read_text()
    assert int(re.search(r"#define KSEEK_ABI_VERSION (\d+)", text).group(1)) == abi.ABI_VERSION
    for name, val in (("KSEEK_BF16", abi.BF16), ("KSEEK_FP16", abi.FP16), ("KSEEK_FP8_E4M3", abi.FP8_E4M3)):
        assert int(re.search(rf"{name} = (\d+)", text).group(1)) == val
    codes = dict((int(v), k) for k, v in re.findall(r"KSEEK_(OK|ERR_\w+) = (\d+)", text))
    assert sorted(codes) == sorted(abi.STATUS)


def _inputs(**kw):
    base = dict(cu_seqlens_q=None, cu_seqlens_k=None, seqused_k=None, leftpad_k=None, page_table=None,
                sinks=None, q_descale=None, k_descale=None, v_descale=None, out_dtype=torch.bfloat16)
    return SimpleNamespace(**{**base, **kw})


def _check_dump(probe, p: abi.KseekParams):
    got = _lines(probe.dll.probe_dump())
    for name, val in p.to_dict().items():
        if isinstance(val, float):
            assert float(got[name][0]) == pytest.approx(val, rel=1e-7), name
        else:
            assert int(got[name][0]) == (val or 0), name


def test_dense_launch_end_to_end(probe):
    s = Scenario(name="t", batch=2, seqlen_q=3, seqlen_k=5, heads_q=4, heads_kv=2, head_dim=16,
                 head_dim_v=8, causal=True, window=(7, -1), softcap=30.0, scale=0.3, num_splits=5,
                 attention_chunk=96)
    g = torch.Generator().manual_seed(0)
    q = torch.randn(2, 3, 4, 16, generator=g).to(torch.bfloat16)
    k = torch.randn(2, 5, 2, 16, generator=g).to(torch.bfloat16)
    # v as a non-contiguous view: heads before rows in memory
    v = torch.randn(2, 2, 5, 8, generator=g).to(torch.bfloat16).transpose(1, 2)
    inp = _inputs(q=q, k=k, v=v, sinks=torch.randn(4, generator=g))
    o = torch.zeros(2, 3, 4, 8, dtype=torch.bfloat16)
    lse = torch.zeros(2, 4, 3)
    call = abi.Launch(probe, s, inp, o, lse, stream=0x1234)
    with pytest.raises(abi.LaunchError, match=r"status 5 \(abi mismatch\)") as e:
        call()                                  # the probe returns num_splits: 5 is KSEEK_ERR_ABI
    assert (e.value.code, e.value.status) == (5, "abi mismatch") and not isinstance(e.value, NotImplementedError)
    assert probe.dll.probe_stream() == 0x1234
    p = call.params
    _check_dump(probe, p)
    assert (p.workspace, p.workspace_bytes) == (call.workspace.data_ptr(), 4016)   # what the kernel asked
    assert (p.causal, p.window_left, p.window_right) == (1, 7, 0)
    assert p.attention_chunk == 96              # ABI 3, read back by the compiled probe in _check_dump
    assert p.v_row_stride == v.stride(1) == 8 and p.v_head_stride == 40
    assert (p.total_q, p.total_k) == (0, 0)     # dense: not given
    assert torch.equal(o[..., 0], q[..., 0])
    b, h, i = torch.meshgrid(torch.arange(2), torch.arange(4), torch.arange(3), indexing="ij")
    assert torch.equal(lse, (1000 * b + 100 * h + i).float())
    assert probe.workspace_bytes(p) == 4016 and probe.name() == "abi_probe"


def test_varlen_launch_end_to_end(probe):
    s = Scenario(name="v", seqlens_q=(2, 0, 3), seqlens_k=(4, 1, 6), heads_q=2, heads_kv=1, head_dim=8)
    q = torch.randn(5, 2, 8).to(torch.bfloat16)
    k = torch.randn(11, 1, 8).to(torch.bfloat16)
    inp = _inputs(q=q, k=k, v=k.clone(), cu_seqlens_q=torch.tensor([0, 2, 2, 5], dtype=torch.int32),
                  cu_seqlens_k=torch.tensor([0, 4, 5, 11], dtype=torch.int32))
    o = torch.zeros(5, 2, 8, dtype=torch.bfloat16)
    lse = torch.zeros(2, 5)
    call = abi.launch(probe, s, inp, o, lse, 0)
    assert call.status() == 0 and call()[0] is o and call()[1] is lse
    p = call.params
    _check_dump(probe, p)
    assert p.workspace_bytes == 1000 * 2 + 8
    assert (p.batch, p.seqlen_q, p.seqlen_k, p.q_batch_stride, p.lse_head_stride) == (3, 3, 6, 0, 5)
    assert (p.total_q, p.total_k) == (5, 11)    # the packed rows, so no kernel reads cu_seqlens[B] back
    assert torch.equal(o[..., 0], q[..., 0])
    want = torch.tensor([[0, 1, 2000, 2001, 2002], [100, 101, 2100, 2101, 2102]], dtype=torch.float32)
    assert torch.equal(lse, want)


def test_paged_fp8_params(probe):
    s = Scenario(name="p", batch=2, seqlen_q=1, seqlen_k=32, heads_q=4, heads_kv=2, head_dim=16,
                 page_size=16, dtype="fp8", cache_seqlens=(20, 32), sinks=True)
    kc = torch.randn(5, 16, 2, 16).to(torch.float8_e4m3fn)
    ds = torch.rand(2, 2) + 0.5
    inp = _inputs(q=torch.randn(2, 1, 4, 16).to(torch.float8_e4m3fn), k=kc, v=kc.clone(),
                  page_table=torch.tensor([[3, 0], [4, 1]], dtype=torch.int32),
                  seqused_k=torch.tensor([20, 32], dtype=torch.int32), sinks=torch.zeros(4),
                  q_descale=ds, k_descale=ds.clone(), v_descale=ds.clone())
    o = torch.zeros(2, 1, 4, 16, dtype=torch.bfloat16)
    ws = torch.zeros(64, dtype=torch.uint8)
    p = abi.launch(probe, s, inp, o, None, 0, workspace=ws).params    # a given workspace is used as is
    _check_dump(probe, p)
    assert (p.dtype, p.out_dtype, p.lse) == (abi.FP8_E4M3, abi.BF16, None)
    assert (p.page_size, p.num_pages, p.page_table_stride, p.seqlen_k) == (16, 5, 2, 32)
    assert (p.k_batch_stride, p.k_row_stride, p.k_head_stride) == (512, 32, 16)
    assert p.descale_batch_stride == 2 and p.workspace_bytes == 64
    assert p.scale == pytest.approx(0.25)


def test_paged_capacity_mismatch_needs_seqused(probe):
    s = Scenario(name="p", batch=1, seqlen_q=1, seqlen_k=20, heads_q=1, heads_kv=1, head_dim=8, page_size=16)
    kc = torch.zeros(2, 16, 1, 8, dtype=torch.bfloat16)
    inp = _inputs(q=torch.zeros(1, 1, 1, 8, dtype=torch.bfloat16), k=kc, v=kc,
                  page_table=torch.tensor([[0, 1]], dtype=torch.int32))
    with pytest.raises(ValueError, match="seqused_k"):
        abi.make_params(s, inp, torch.zeros(1, 1, 1, 8, dtype=torch.bfloat16), None)


def test_shape_mismatch_is_refused():
    s = Scenario(name="t", batch=1, seqlen_q=2, seqlen_k=2, heads_q=2, heads_kv=2, head_dim=8)
    x = torch.zeros(1, 2, 2, 16, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match="do not match scenario"):
        abi.make_params(s, _inputs(q=x, k=x, v=x), x, None)


# ---- the one launch path: workspace rule and status codes, on a real library ----------------------
MINI = r"""
#include "kseek.h"
// No kseek_workspace_bytes: the harness must still give a real workspace of the minimum size.
extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t) {
  if (p->workspace == NULL) return KSEEK_ERR_INVALID;
  if (p->workspace_bytes < 16) return KSEEK_ERR_WORKSPACE;
  return p->num_splits;        // the status the test asks for
}
"""


@pytest.fixture(scope="module")
def mini(tmp_path_factory) -> abi.KernelLib:
    d = tmp_path_factory.mktemp("abi_mini")
    (d / "mini.cu").write_text(MINI)
    r = subprocess.run([find_nvcc(), "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared", f"-I{REPO_KERNELS}",
                        str(d / "mini.cu"), "-o", str(d / "mini.so")], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    return abi.load(d / "mini.so")


def _dense(num_splits: int):
    s = Scenario(name="m", batch=1, seqlen_q=2, seqlen_k=2, heads_q=1, heads_kv=1, head_dim=8, num_splits=num_splits)
    x = torch.zeros(1, 2, 1, 8, dtype=torch.bfloat16)
    return s, _inputs(q=x, k=x, v=x), torch.zeros_like(x)


def test_a_kernel_asking_no_workspace_still_gets_the_minimum(mini, probe):
    s, inp, o = _dense(0)
    assert mini.workspace_bytes(abi.make_params(s, inp, o, None)) == 0
    call = abi.launch(mini, s, inp, o, None, stream=0)         # the kernel refuses NULL or < 16 bytes
    ws = call.workspace
    assert ws.numel() == abi.MIN_WORKSPACE_BYTES == call.params.workspace_bytes and ws.dtype == torch.uint8
    assert call.params.workspace == ws.data_ptr() != 0
    assert abi.workspace_for(probe, s, inp, o, None).numel() == 1000 + 8   # above the minimum: as asked


@pytest.mark.parametrize("code, name", [(1, "unsupported"), (2, "invalid"), (3, "cuda error"),
                                        (4, "workspace too small"), (5, "abi mismatch"), (42, "unknown status")])
def test_status_codes_become_exceptions_named_by_the_status(mini, code, name):
    s, inp, o = _dense(code)
    call = abi.Launch(mini, s, inp, o, None, stream=0)
    assert call.status() == code                               # the raw code, unchanged
    with pytest.raises(abi.LaunchError) as e:
        call("during timing")
    assert (e.value.code, e.value.status) == (code, name)
    assert str(e.value) == f"kernel returned status {code} ({name}) during timing"
    assert isinstance(e.value, NotImplementedError) == (code == 1)   # abi.Unsupported for status 1 only
