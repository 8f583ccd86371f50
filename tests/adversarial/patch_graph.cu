// TRICK: computes honestly, and in eager calls reports honestly; then patches the harness in its own
// process (the interpreter found with dlsym, as patch_python.cu does) so that kernelseek.graph_timing's
// time_graph reports the candidate's CUDA-graph replay 10x faster than it ran. Only graph_ms lies:
// graph_speedup, and a goal judged on the graph measure (decode rows, DESIGN.md's contract), would
// take the lie.
// EXPECT: status=refused, reason contains "imports dlsym"
// CLOSED: the host-code gate refuses dlsym; with the gate off (tests/gpu/test_forge_gpu.py, --graph),
// the parent's graph burst (m calls per replay, m the parent's) takes ~10x longer than the claimed
// graph time allows: graph_ms is moved out of the row ("graph time not corroborated") and
// graph_speedup is None, while the honest per-call time passes.
#include <dlfcn.h>

#include "honest_core.cuh"

namespace {
const char kGraphPatch[] =
    "import kernelseek.graph_timing as _t\n"
    "if not getattr(_t, '_adv_graph_patched', False):\n"
    "    _orig_graph = _t.time_graph\n"
    "    def _graph_lie(make_call, n_sets, hooks=None, name='candidate', *a, **k):\n"
    "        ms, p10, p90 = _orig_graph(make_call, n_sets, hooks, name, *a, **k)\n"
    "        return (ms / 10, p10 / 10, p90 / 10) if name == 'candidate' else (ms, p10, p90)\n"
    "    _t.time_graph = _graph_lie\n"
    "    _t._adv_graph_patched = True\n";
bool patched = false;
}  // namespace

extern "C" int kseek_fwd(const kseek_params* p, cudaStream_t stream) {
  const int rc = hc::launch(p, stream);
  if (!patched) {
    patched = true;
    auto gil = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    auto ungil = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    auto exec = (int (*)(const char*))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (gil && ungil && exec) {
      const int state = gil();
      exec(kGraphPatch);
      ungil(state);
    }
  }
  return rc;
}

extern "C" const char* kseek_name(void) { return "adv_patch_graph"; }
