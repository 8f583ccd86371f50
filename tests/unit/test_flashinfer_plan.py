"""The FlashInfer adapter's decisions on the CPU, with FlashInfer absent: which wrapper it binds and which
module FlashInfer then loads, per scenario (module_plan); which scenarios it declines and why; the modules
tools/flashinfer_aot.py builds (exactly the plans, in order of use).

With FlashInfer importable (it is not, here, unless KSEEK_TEST_FLASHINFER_SITE or /tmp/fi-aot-site holds an
unpacked flashinfer + apache-tvm-ffi, as `tools/flashinfer.sh aot` makes): the module names come from
flashinfer.jit itself and agree with the JitSpec each plan builds (FA2's is the "_kv_stride_equal" build
that FlashInfer 0.7.x loads), and with KSEEK_FLASHINFER_JIT=0 a scenario whose module is not built is
declined naming it, and taken once the module is there.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelseek.baselines import flashinfer as FI
from kernelseek.scenarios import Scenario, load_grid

REPO = Path(__file__).resolve().parents[2]
RAGGED, PAGED, DECODE = (FI.WRAPPERS[k] for k in ("ragged", "paged", "decode"))


def _plan(s):
    p = FI.module_plan(s)
    return (p.wrapper, p.kind, p.backend, p.head_dim_qk, p.swa, p.cap, p.tensor_cores)


BENCH26 = {   # row -> (wrapper, module kind, backend, head dim, window, softcap, tensor cores)
    **{r: (RAGGED, "prefill", "fa3", 64, False, False, False) for r in (1, 2, 3)},
    **{r: (RAGGED, "prefill", "fa3", 128, False, False, False) for r in (4, 5, 6, 7, 8, 9, 10, 11, 12, 18, 19)},
    **{r: (RAGGED, "prefill", "fa3", 256, False, False, False) for r in (13, 14, 15)},
    **{r: (DECODE, "prefill", "fa2", 128, False, False, True) for r in (20, 21, 22, 23, 24)},
    25: (RAGGED, "prefill", "fa3", 128, True, False, False),
    26: (RAGGED, "prefill", "fa3", 256, False, True, False),
}


def test_each_bench26_row_gets_the_wrapper_and_module_flashinfer_would_load():
    fi = FI.FlashInfer()
    got = {s.row: _plan(s) for s in load_grid("bench26") if fi.supports(s)[0]}
    assert got == BENCH26


def test_production_paged_prefill_and_decode_rows():
    plans = {s.row: _plan(s) for s in load_grid("production")}
    assert plans[6] == plans[7] == (PAGED, "prefill", "fa3", 128, False, False, False)   # chunked prefill, paged
    assert plans[9] == (RAGGED, "prefill", "fa3", 128, True, False, False)              # Mistral's window
    assert plans[10] == (RAGGED, "prefill", "fa3", 256, False, True, False)             # Gemma-2's softcap
    assert all(plans[r] == (DECODE, "prefill", "fa2", 128, False, False, True) for r in range(11, 18))


@pytest.mark.parametrize("kw, plan", [
    (dict(heads_q=8, heads_kv=8), (DECODE, "decode", "", 128, False, False, False)),     # MHA decode: CUDA cores
    (dict(heads_q=6, heads_kv=2), (DECODE, "decode", "", 128, False, False, False)),     # group 3: below 4
    (dict(heads_q=8, heads_kv=2), (DECODE, "prefill", "fa2", 128, False, False, True)),  # group 4: tensor cores
])
def test_decode_takes_tensor_cores_from_a_gqa_group_of_four(kw, plan):
    s = Scenario(name="d", batch=2, seqlen_q=1, seqlen_k=256, head_dim=128, page_size=16, kind="decode", **kw)
    assert FI.FlashInfer().supports(s)[0] and _plan(s) == plan


def test_dtype_and_hopper_decide_the_module():
    s = Scenario(name="p", batch=1, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=4, head_dim=128, dtype="fp16")
    assert FI.module_plan(s).dtype == "fp16" and FI.module_plan(s).backend == "fa3"
    assert FI.module_plan(s, sm90=False).backend == "fa2"           # not Hopper: FlashInfer's FA2 template
    assert FI.module_plan(s).describe() == "FA3 prefill hd128"
    w = Scenario(name="w", batch=1, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=4, head_dim=256, window=(32, 0),
                 softcap=30.0)
    assert FI.module_plan(w).describe() == "FA3 prefill hd256 window softcap"


@pytest.mark.parametrize("row, words", [(16, "head_dim 96"), (17, "head_dim 192")])
def test_head_dims_96_and_192_are_declined_saying_why(row, words):
    s = next(s for s in load_grid("bench26") if s.row == row)
    ok, why = FI.FlashInfer().supports(s)
    assert not ok and words in why and "FA3" in why and "FA2" in why


def test_the_plans_need_no_flashinfer():
    code = ("import sys, json; from kernelseek.baselines import flashinfer as FI; from kernelseek.scenarios import "
            "load_grid; [FI.module_plan(s) for g in ('bench26', 'production', 'hopper') for s in load_grid(g)]; "
            "print(json.dumps('flashinfer' in sys.modules))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=120)
    assert r.returncode == 0, r.stderr[-1000:]
    assert json.loads(r.stdout) is False


def _aot():
    spec = importlib.util.spec_from_file_location("flashinfer_aot", REPO / "tools" / "flashinfer_aot.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_aot_builds_one_module_per_distinct_plan_in_order_of_use():
    got = [(p.describe(), used) for p, used in _aot().plans()]
    assert [d for d, _ in got] == ["FA3 prefill hd64", "FA3 prefill hd128", "FA3 prefill hd256", "FA2 prefill hd128",
                                   "FA3 prefill hd128 window", "FA3 prefill hd256 softcap"]
    used = dict(got)
    assert used["FA3 prefill hd256"] == ["bench26:13", "bench26:14", "bench26:15"]
    assert used["FA3 prefill hd128 window"] == ["bench26:25", "production:9"]
    assert "production:6" in used["FA3 prefill hd128"]            # the paged wrapper loads the same module
    assert used["FA2 prefill hd128"][:5] == [f"bench26:{r}" for r in range(20, 25)]


def test_aot_list_runs_without_flashinfer():
    r = subprocess.run([sys.executable, str(REPO / "tools" / "flashinfer_aot.py"), "--list"], capture_output=True,
                       text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": ""}, timeout=120)
    assert r.returncode == 0, r.stderr[-1000:]
    lines = r.stdout.strip().splitlines()
    assert len(lines) == 6 and lines[2].startswith("FA3 prefill hd256") and "bench26:13" in lines[2]


# ---- with FlashInfer itself (skipped where it cannot be imported) ------------------------------------------
def _fi_site() -> str | None:
    if importlib.util.find_spec("flashinfer"):
        return ""
    for p in (os.environ.get("KSEEK_TEST_FLASHINFER_SITE"), "/tmp/fi-aot-site"):
        if p and (Path(p) / "flashinfer" / "__init__.py").is_file() and (Path(p) / "tvm_ffi").is_dir():
            return p
    return None


NAMES = """
import json, os
from pathlib import Path
from kernelseek.baselines import flashinfer as FI
from kernelseek.scenarios import load_grid
rows = {s.row: s for s in load_grid("bench26")}
out = {"names": {r: FI.module_name(rows[r]) for r in (1, 13, 20, 25, 26)},
       "specs": {r: FI.module_spec(FI.module_plan(rows[r])).name for r in (1, 13, 20, 25, 26)}}
fi = FI.FlashInfer()
out["before"] = fi.supports_now(rows[13])
from flashinfer.jit import env
so = env.FLASHINFER_JIT_DIR / out["names"][13] / (out["names"][13] + ".so")
so.parent.mkdir(parents=True, exist_ok=True); so.write_bytes(b"")
out["after"] = fi.supports_now(rows[13])
print(json.dumps(out))
"""


def test_flashinfer_names_the_modules_the_adapter_asks_for(tmp_path):
    site = _fi_site()
    if site is None:
        pytest.skip("FlashInfer not importable here (set KSEEK_TEST_FLASHINFER_SITE to an unpacked flashinfer "
                    "+ apache-tvm-ffi, e.g. the folder `tools/flashinfer.sh aot` makes)")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), site) if p),
           "FLASHINFER_WORKSPACE_BASE": str(tmp_path), "FLASHINFER_CUDA_ARCH_LIST": "9.0a", FI.JIT_ENV: "0"}
    r = subprocess.run([sys.executable, "-c", NAMES], capture_output=True, text=True, cwd=tmp_path, env=env,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    names = out["names"]
    assert names == out["specs"]                       # the name we check is the module the spec builds
    assert names["20"].endswith("_head_dim_qk_128_head_dim_vo_128_posenc_0_use_swa_False_use_logits_cap_False"
                                "_f16qk_False_kv_stride_equal")          # decode with tensor cores: FA2's primary
    assert names["13"].endswith("head_dim_qk_256_head_dim_vo_256_posenc_0_use_swa_False_use_logits_cap_False"
                                "_f16qk_False_sm90")
    assert "use_swa_True" in names["25"] and "use_logits_cap_True" in names["26"]
    ok, why = out["before"]
    assert not ok and why.startswith("FA3 prefill hd256 module not built") and names["13"] in why
    assert out["after"] == [True, ""]
