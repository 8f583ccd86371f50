"""The run-time code check on the GPU, alone: does the CUPTI monitor see what runs, by code?

    PYTHONPATH=. python3 tools/trust_probe.py [--out probe.json]      (exit 0 when every step holds)

Steps, each recorded in the JSON (tests/gpu/test_trust_gpu.py asserts them; tools/gpu_trust.sh
runs it first):
  own        kernels/naive_fwd.cu built and called inside a window: its launches are attributed
             to its own code (the module the driver loaded has the embedded cubin's code);
  blas       a torch matmul inside a window: cuBLAS's kernel is refused, named;
  renamed    two cubins built here define the same kernel name with different code; the
             "candidate" owns one, the other is loaded with cuModuleLoadData and launched with
             cuLaunchKernel inside a window: refused (code, not name);
  thread     a torch kernel launched from another Python thread, outside any window: seen;
  outside    launches on the harness's thread outside a window: not recorded;
  activity   device time of a candidate call from CUPTI's activity records.
"""
from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

TWIN = r'''extern "C" __global__ void twin_kernel(int* p) { p[0] = %d; p[1] += %d; }'''


def _cubin(value: int, d: Path) -> bytes:
    from kernelseek.build import find_nvcc
    src = d / f"twin{value}.cu"
    src.write_text(TWIN % (value, value))
    out = d / f"twin{value}.cubin"
    subprocess.run([find_nvcc(), "-cubin", "-arch=sm_90a", "-O2", str(src), "-o", str(out)], check=True,
                   capture_output=True, timeout=300)
    return out.read_bytes()


def _launch_cubin(img: bytes, buf_ptr: int) -> int:
    """cuModuleLoadData + cuModuleGetFunction + cuLaunchKernel on the current context; returns rc."""
    cu = ctypes.CDLL("libcuda.so.1")
    mod, fn = ctypes.c_void_p(), ctypes.c_void_p()
    rc = cu.cuModuleLoadData(ctypes.byref(mod), ctypes.c_char_p(img))
    if rc:
        return rc
    rc = cu.cuModuleGetFunction(ctypes.byref(fn), mod, b"twin_kernel")
    if rc:
        return rc
    arg = ctypes.c_void_p(buf_ptr)
    params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(arg), ctypes.c_void_p))
    return cu.cuLaunchKernel(fn, 1, 1, 1, 1, 1, 1, 0, None, params, None)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    import torch                                         # imported, CUDA not initialized yet
    from kernelseek import abi, cubins, runcheck
    from kernelseek import build as B
    from kernelseek.inputs import alloc_outputs, make_inputs
    from kernelseek.scenarios import Scenario
    res: dict = {}
    t0 = time.perf_counter()
    mon = runcheck.Monitor.start()
    res["monitor"] = f"{mon.cupti}; {mon.note}"
    s = Scenario(name="probe", batch=1, seqlen_q=128, seqlen_k=128, heads_q=2, heads_kv=2, head_dim=64, causal=True)
    br = B.build(REPO / "kernels" / "naive_fwd.cu")
    own = cubins.own_code(br.so_path)
    inp = make_inputs(s, 0, device="cuda", gen_device="cuda")
    o, lse = alloc_outputs(s, inp)
    stream = torch.cuda.current_stream().cuda_stream
    torch.cuda.synchronize()
    mon.take()
    with mon.window():
        lib = abi.load(br.so_path)
        abi.launch(lib, s, inp, o, lse, stream)          # raises abi.LaunchError unless KSEEK_OK
        rc = 0
    torch.cuda.synchronize()
    ls = mon.take()
    res["own"] = {"rc": rc, "launches": [(x.domain, x.api, x.name[:70], x.module_sig[:12], x.ret) for x in ls],
                  "reasons": runcheck.judge(ls, mon.modules, own),
                  "cubin_loaded_identically": any(own.owns_cubin(m.sha256) for m in mon.modules.values()),
                  "code_loaded": any(own.owns_code(h) for m in mon.modules.values() for h in m.kernels.values()),
                  "modules_seen": len(mon.modules)}
    a = torch.randn(512, 512, device="cuda")
    torch.cuda.synchronize()
    mon.take()
    with mon.window():
        _ = a @ a
    torch.cuda.synchronize()
    ls = mon.take()
    res["blas"] = {"launches": [(x.domain, x.api, x.name[:70]) for x in ls],
                   "reasons": runcheck.judge(ls, mon.modules, own)}
    with tempfile.TemporaryDirectory() as d:
        mine, other = _cubin(1, Path(d)), _cubin(2, Path(d))
    t_mine = cubins.kernel_table(mine)
    twin_own = cubins.OwnCode({t_mine.sha256: t_mine}, set(t_mine.kernels.values()))
    buf = torch.zeros(4, dtype=torch.int32, device="cuda")
    torch.cuda.synchronize()
    mon.take()
    with mon.window():
        rc_other = _launch_cubin(other, buf.data_ptr())
    torch.cuda.synchronize()
    ls = mon.take()
    res["renamed"] = {"rc": rc_other, "buf": buf.tolist(), "launches": [(x.api, x.name, x.module_sig[:12]) for x in ls],
                      "reasons": runcheck.judge(ls, mon.modules, twin_own)}
    done = threading.Event()

    def other_thread():
        (a * 2).sum()
        torch.cuda.synchronize()
        done.set()
    threading.Thread(target=other_thread).start()
    done.wait(30)
    ls = mon.take()
    res["thread"] = {"launches": len(ls), "other": sum(x.other_thread for x in ls),
                     "reasons": runcheck.judge(ls, mon.modules, own)}
    _ = (a + 1).sum()                                    # the harness's own thread, no window
    torch.cuda.synchronize()
    res["outside"] = {"launches": len(mon.take())}
    out: dict = {}
    with mon.activity(out):
        with mon.window():
            abi.launch(lib, s, inp, o, lse, stream)
        torch.cuda.synchronize()
    res["activity"] = {"records": len(out.get("records", [])), "kernel_ms": runcheck.device_ms(out.get("records", [])),
                       "names": sorted({r[4][:60] for r in out.get("records", []) if r[0] == "K"})}
    mon.take()
    res["seconds"] = round(time.perf_counter() - t0, 1)
    checks = {
        "own code recognized": not res["own"]["reasons"] and bool(res["own"]["launches"]),
        "cuBLAS refused": bool(res["blas"]["reasons"]),
        "renamed cubin refused": bool(res["renamed"]["reasons"]) and res["renamed"]["rc"] == 0,
        "other thread seen": res["thread"]["other"] > 0 and bool(res["thread"]["reasons"]),
        "outside not recorded": res["outside"]["launches"] == 0,
        "activity kernel time": res["activity"]["kernel_ms"] > 0,
    }
    res["checks"] = checks
    text = json.dumps(res, indent=1, default=str)
    if args.out:
        Path(args.out).write_text(text + "\n")
    print(text)
    for k, v in checks.items():
        print(f"{'ok  ' if v else 'FAIL'} {k}")
    return 0 if all(checks.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
