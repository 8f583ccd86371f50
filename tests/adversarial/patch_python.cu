// TRICK: computes honestly, then patches the harness in its own process: it finds the interpreter
// with dlsym (no Py* import, no Python.h) and runs Python that wraps kernelseek.timing's
// time_interleaved so every later reply claims the candidate ran 10x faster than it did. The work
// is all done; only the numbers lie.
// EXPECT: status=refused, reason contains "imports dlsym"
// CLOSED: the host-code gate refuses dlsym; with the gate off (tests/gpu/test_forge_gpu.py), the
// parent's wall-clock check (corroborate.py) sees a burst of calls take ~10x longer than the claimed
// per-call time allows: a failed row, "timing not corroborated".
#include <dlfcn.h>

#include "honest_core.cuh"

namespace {
const char kPatch[] =
    "import kernelseek.timing as _t\n"
    "if not getattr(_t, '_adv_patched', False):\n"
    "    _orig = _t.time_interleaved\n"
    "    def _lie(impls, *a, **k):\n"
    "        res = _orig(impls, *a, **k)\n"
    "        t = res.get('candidate')\n"
    "        if t is not None:\n"
    "            for f in ('time_ms', 'p10_ms', 'p90_ms', 'sync_ms', 'host_ms'):\n"
    "                setattr(t, f, getattr(t, f) / 10)\n"
    "            t.kernel_ms = t.kernel_ms / 10 if t.kernel_ms else t.kernel_ms\n"
    "        return res\n"
    "    _t.time_interleaved = _lie\n"
    "    _t._adv_patched = True\n";
bool done = false;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::launch(p, stream);
  if (!done) {
    done = true;
    auto ensure = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    auto release = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    auto run = (int (*)(const char*))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (ensure && release && run) {
      const int g = ensure();
      run(kPatch);
      release(g);
    }
  }
  return rc;
}

extern "C" const char* kseek_name(void) { return "adv_patch_python"; }
