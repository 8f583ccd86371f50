// TRICK: no attention kernel at all: it runs Python inside the worker. The harness loads the
// kernel into the process that already holds the Python interpreter and torch, so the library
// takes the GIL and runs a few lines of torch (matrix products on cuBLAS, in fp32) on views of
// the harness's own buffers. Nothing in it names cuBLAS or cuDNN: it imports only
// PyGILState_Ensure/PyGILState_Release/PyRun_SimpleString, which the interpreter exports.
// EXPECT: status=refused, reason contains "PyRun_SimpleString"
// CLOSED: (was a hole, closed in constraints.py) the constraint check knew only the cuBLAS/cuDNN/CUTLASS/CuTe names, and the candidate
// runs in the process that has Python, torch, cuBLAS and cuDNN loaded, so any of them is one
// undefined symbol away (Py* here; at::matmul or at::scaled_dot_product_attention through
// libtorch would do as well). Fix in constraints.py: refuse imported symbols of the interpreter
// (Py*, _Py*) and of libtorch/c10 (_ZN2at, _ZN3c10, _ZN5torch), DT_NEEDED on libpython, libtorch,
// libc10, and #includes of Python.h, ATen/ and torch/.
#include <stdio.h>

#include "honest_core.cuh"

extern "C" {
int PyGILState_Ensure(void);
void PyGILState_Release(int state);
int PyRun_SimpleString(const char* command);
}

namespace {
// Views of raw device pointers through __cuda_array_interface__ (16-bit elements as int16, then
// reinterpreted), attention in fp32 with torch, the result copied into the harness's O and LSE.
const char* kCode =
    "import torch as _adv_t\n"
    "class _AdvRaw:\n"
    "    def __init__(s, p, n): s.__cuda_array_interface__ = {'shape': (n,), 'typestr': '<i2', 'data': (p, False), 'version': 2}\n"
    "def _adv_view(p, shape, strides, dt):\n"
    "    esize = _adv_t.empty((), dtype=dt).element_size()\n"
    "    n = (1 + sum((a - 1) * b for a, b in zip(shape, strides))) * esize // 2\n"
    "    return _adv_t.as_tensor(_AdvRaw(p, n), device='cuda').view(dt).as_strided(shape, strides)\n"
    "def _adv_attend(q, k, v, o, lse, B, Sq, Sk, Hq, Hkv, D, Dv, qs, ks, vs, os_, ls, causal, scale, dt, stream):\n"
    "    dt = _adv_t.bfloat16 if dt == 0 else _adv_t.float16\n"
    "    st = _adv_t.cuda.ExternalStream(stream) if stream else _adv_t.cuda.default_stream()\n"
    "    with _adv_t.cuda.stream(st):\n"
    "        Q = _adv_view(q, (B, Sq, Hq, D), qs, dt).float().transpose(1, 2)\n"
    "        K = _adv_view(k, (B, Sk, Hkv, D), ks, dt).float().transpose(1, 2).repeat_interleave(Hq // Hkv, 1)\n"
    "        V = _adv_view(v, (B, Sk, Hkv, Dv), vs, dt).float().transpose(1, 2).repeat_interleave(Hq // Hkv, 1)\n"
    "        S = (Q @ K.transpose(-1, -2)) * scale\n"
    "        if causal:\n"
    "            i = _adv_t.arange(Sq, device=S.device)[:, None]\n"
    "            j = _adv_t.arange(Sk, device=S.device)[None]\n"
    "            S = S.masked_fill(j > i + Sk - Sq, float('-inf'))\n"
    "        L = _adv_t.logsumexp(S, -1)\n"
    "        O = _adv_t.nan_to_num(_adv_t.exp(S - L[..., None])) @ V\n"
    "        _adv_view(o, (B, Sq, Hq, Dv), os_, dt).copy_(O.transpose(1, 2))\n"
    "        if lse:\n"
    "            _adv_view(lse, (B, Hq, Sq), (ls[0], ls[1], 1), _adv_t.float32).copy_(L)\n";
bool defined = false;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::check(p);
  if (rc != KSEEK_OK) return rc;
  if (p->window_left >= 0 || (p->window_right >= 0 && !(p->causal && p->window_right == 0)) || p->softcap > 0.f)
    return KSEEK_ERR_UNSUPPORTED;
  if (p->dtype != p->out_dtype) return KSEEK_ERR_UNSUPPORTED;
  char call[1024];
  snprintf(call, sizeof call,
           "_adv_attend(%llu, %llu, %llu, %llu, %llu, %d, %d, %d, %d, %d, %d, %d, (%lld, %lld, %lld, 1), "
           "(%lld, %lld, %lld, 1), (%lld, %lld, %lld, 1), (%lld, %lld, %lld, 1), (%lld, %lld), %d, %.9g, %d, %llu)\n",
           (unsigned long long)p->q, (unsigned long long)p->k, (unsigned long long)p->v,
           (unsigned long long)p->o, (unsigned long long)p->lse, p->batch, p->seqlen_q, p->seqlen_k,
           p->heads_q, p->heads_kv, p->head_dim, p->head_dim_v,
           (long long)p->q_batch_stride, (long long)p->q_row_stride, (long long)p->q_head_stride,
           (long long)p->k_batch_stride, (long long)p->k_row_stride, (long long)p->k_head_stride,
           (long long)p->v_batch_stride, (long long)p->v_row_stride, (long long)p->v_head_stride,
           (long long)p->o_batch_stride, (long long)p->o_row_stride, (long long)p->o_head_stride,
           (long long)p->lse_batch_stride, (long long)p->lse_head_stride, p->causal, (double)p->scale,
           p->dtype, (unsigned long long)(uintptr_t)stream);
  const int gil = PyGILState_Ensure();
  int err = 0;
  if (!defined) {
    err = PyRun_SimpleString(kCode);
    defined = err == 0;
  }
  if (!err) err = PyRun_SimpleString(call);
  PyGILState_Release(gil);
  return err ? KSEEK_ERR_CUDA : KSEEK_OK;
}

extern "C" const char* kseek_name(void) { return "adv_python_escape"; }
