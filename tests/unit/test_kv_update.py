"""The attention helper kernels' host side without a GPU (kernels/kv_update.cu, kernels/seqused_segments.cu):
real nvcc builds, kv_update's struct layout against kernelseek.kv_update.KvuParams, their parameter checks,
and which calls take the torch path."""
import ctypes
import re
import subprocess

import pytest

torch = pytest.importorskip("torch")

from kernelseek import kv_update  # noqa: E402
from kernelseek.build import arch_flags, find_nvcc  # noqa: E402

PROBE = r"""
#include <cstddef>
#include <cstdio>
#include "kv_update.cu"
extern "C" const char* probe_offsets(void) {
  static char buf[8192]; int n = 0;
  n += snprintf(buf + n, sizeof buf - n, "sizeof %zu 0\n", sizeof(kseek_kvu_params));
  OFFSETS
  return buf;
}
"""


def _fields_in_source() -> list[str]:
    body = re.search(r"typedef struct \{(.*?)\} kseek_kvu_params;", kv_update.KERNEL.read_text(), re.S).group(1)
    names = []
    for line in body.splitlines():
        decl = line.split("//")[0].strip()
        for part in filter(None, (x.strip() for x in decl.split(";"))):
            for i, item in enumerate(part.split(",")):
                names.append(re.findall(r"[A-Za-z_]\w*", item)[-1])
    return names


def test_fields_match_the_kernel_source_in_order():
    assert _fields_in_source() == [n for n, _ in kv_update.KvuParams._fields_]


@pytest.fixture(scope="module")
def offsets(tmp_path_factory):
    lines = [f'n += snprintf(buf + n, sizeof buf - n, "{n} %zu %zu\\n", offsetof(kseek_kvu_params, {n}), '
             f'sizeof(((kseek_kvu_params*)0)->{n}));' for n, _ in kv_update.KvuParams._fields_]
    d = tmp_path_factory.mktemp("kvu_probe")
    (d / "probe.cu").write_text(PROBE.replace("OFFSETS", "\n  ".join(lines)))
    so = d / "probe.so"
    r = subprocess.run([find_nvcc(), *arch_flags("sm_90a"), "-shared", "-Xcompiler", "-fPIC", "--cudart", "shared",
                        f"-I{kv_update.KERNEL.parent}", str(d / "probe.cu"), "-o", str(so)], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    dll = ctypes.CDLL(str(so))
    dll.probe_offsets.restype = ctypes.c_char_p
    return {ln.split()[0]: tuple(map(int, ln.split()[1:])) for ln in dll.probe_offsets().decode().splitlines()}


def test_struct_offsets_match_the_compiled_kernel(offsets):
    assert offsets.pop("sizeof")[0] == ctypes.sizeof(kv_update.KvuParams)
    for name, _ in kv_update.KvuParams._fields_:
        f = getattr(kv_update.KvuParams, name)
        assert (f.offset, f.size) == offsets[name], name


def test_built_library_checks_its_params_before_launching():
    """The harness's build of the kernel passes the constraint check; kseek_kv_update refuses a wrong ABI
    version and inconsistent params with its status codes, launching nothing (no GPU here)."""
    fn = kv_update._lib()
    p = kv_update.KvuParams()
    p.abi_version = 99
    assert fn(ctypes.byref(p), None) == 1
    p.abi_version, p.batch, p.head_dim, p.head_dim_v = kv_update.ABI_VERSION, 2, 100, 128   # D not a multiple of 8
    assert fn(ctypes.byref(p), None) == 2
    p.head_dim, p.total_new, p.seqlen_new = 128, 4, 2                                       # rows but no pointers
    seqlens = (ctypes.c_int32 * 2)(1, 2)
    p.seqlens = ctypes.addressof(seqlens)
    assert fn(ctypes.byref(p), None) == 2
    p.rotary_dim = 24                                                                        # not a multiple of 16
    assert fn(ctypes.byref(p), None) == 2


def test_cpu_and_mixed_dtype_calls_take_the_torch_path():
    q = torch.zeros(1, 1, 2, 64, dtype=torch.bfloat16)
    kc = torch.zeros(1, 16, 2, 64, dtype=torch.bfloat16)
    k = torch.zeros(1, 1, 2, 64, dtype=torch.bfloat16)
    assert not kv_update.supported(q, kc, kc, k, k, cu_q=None, cu_new=None, cos=None, page_table=None)
    assert kv_update.update(q, kc, kc, k, k, seqlens=torch.zeros(1, dtype=torch.int32), page_table=None,
                            batch_idx=None, cu_q=None, cu_new=None, cos=None, sin=None, ro=None, interleaved=True,
                            per_row=True) is None


def test_seqused_segments_library_checks_its_arguments_and_cpu_takes_torch():
    """kernels/seqused_segments.cu builds, passes the constraint check and refuses null pointers without
    launching (status 2); CPU tensors answer None (attention_plan keeps its torch ops)."""
    from kernelseek import seqused_segments as S
    fn = S._fn()
    assert fn(None, None, None, None, 3, None, None) == 2
    cu = torch.tensor([0, 2, 5], dtype=torch.int32)
    assert S.segments(cu, torch.tensor([1, 9], dtype=torch.int32), cu, None) is None
