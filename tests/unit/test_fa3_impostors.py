"""Issue 24 item 5: a module named flash_attn_interface that is not FlashAttention-3 is never taken for it.

In this process (a module file on sys.path): bare, beside a forged dist-info without a compiled extension,
with content that differs from its RECORD, and with a compiled library that has no FA3 forward entry, each
is refused; one backed by its distribution's RECORD and a loaded extension with FA3's `fwd` is accepted
(the positive control: the check can pass). In a fresh interpreter (subprocess, the impostor a package
first on PYTHONPATH, no FA3 library staged): the same refusals through the fa3 baseline itself, as a run
would meet them: FA3().available() and choose_why() say why, and `best` never picks fa3; among them our
own kernel under FA3's name (tools/fa3tests_shim.py's module) in a folder outside the checkout.
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

from kernelseek.baselines import fa3_vllm, get
from kernelseek.baselines.flash_attn import is_real_fa3

REPO = Path(__file__).resolve().parents[2]
ENTRY = ("def flash_attn_func(*a, **k): pass\ndef flash_attn_varlen_func(*a, **k): pass\n"
         "def flash_attn_with_kvcache(*a, **k): pass\n")


# ---- in this process ------------------------------------------------------------------------------
def _record_hash(p: Path) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(p.read_bytes()).digest()).rstrip(b"=").decode()


def _fake_dist(root: Path, module_src: str, record_extra=(), wrong_hash=False) -> None:
    """flash_attn_interface.py plus a flash_attn_3 dist-info that claims it (RECORD with hashes)."""
    mod = root / "flash_attn_interface.py"
    mod.write_text(module_src)
    info = root / "flash_attn_3-3.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: flash_attn_3\nVersion: 3.0.0\n")
    (info / "top_level.txt").write_text("flash_attn_interface\n")
    h = "sha256=AAAA" if wrong_hash else _record_hash(mod)
    lines = [f"flash_attn_interface.py,{h},{mod.stat().st_size}"]
    lines += [f"{p.name},{_record_hash(p)},{p.stat().st_size}" for p in record_extra]
    (info / "RECORD").write_text("\n".join(lines + ["flash_attn_3-3.0.0.dist-info/RECORD,,"]) + "\n")


def _probe(root: Path, monkeypatch):
    """is_real_fa3 with `root` first on sys.path, in a clean import state."""
    monkeypatch.syspath_prepend(str(root))
    for m in ("flash_attn_interface", "fa3_fake_ext"):
        sys.modules.pop(m, None)
    import importlib
    importlib.invalidate_caches()
    try:
        return is_real_fa3("flash_attn_interface")
    finally:
        for m in ("flash_attn_interface", "fa3_fake_ext"):
            sys.modules.pop(m, None)


def test_forged_dist_info_without_a_compiled_extension_is_not_fa3(tmp_path, monkeypatch):
    _fake_dist(tmp_path, ENTRY)
    ok, why = _probe(tmp_path, monkeypatch)
    assert not ok and "no compiled extension" in why


def test_a_module_that_differs_from_its_record_is_not_fa3(tmp_path, monkeypatch):
    _fake_dist(tmp_path, ENTRY, wrong_hash=True)
    ok, why = _probe(tmp_path, monkeypatch)
    assert not ok and "differs" in why


def test_the_fa3_baseline_refuses_an_impostor_and_says_why(tmp_path, monkeypatch):
    _fake_dist(tmp_path, ENTRY)
    monkeypatch.setattr(fa3_vllm, "candidates", lambda: [tmp_path / "absent.so"])
    fa3_vllm.load.cache_clear()
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("flash_attn_interface", None)
    try:
        ok, why = get("fa3").available()
        assert not ok and "FA3 unavailable" in why and "not FlashAttention-3" in why and "absent.so" in why
    finally:
        sys.modules.pop("flash_attn_interface", None)
        fa3_vllm.load.cache_clear()


def _build_ext(tmp_path, fwd: bool = True) -> Path | None:
    """A minimal CPython extension module fa3_fake_ext (stands for FA3's compiled kernels), with a `fwd`
    function (FA3's forward entry in its older builds) or without one."""
    cc, inc = shutil.which("gcc") or shutil.which("cc"), sysconfig.get_paths()["include"]
    if not cc or not (Path(inc) / "Python.h").is_file():
        return None
    src = tmp_path / "ext.c"
    src.write_text(textwrap.dedent("""
        #include <Python.h>
        static PyObject *fwd(PyObject *self, PyObject *args) { Py_RETURN_NONE; }
        static PyMethodDef fns[] = {{"fwd", fwd, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};
        static struct PyModuleDef m = {PyModuleDef_HEAD_INIT, "fa3_fake_ext", NULL, -1, FWD};
        PyMODINIT_FUNC PyInit_fa3_fake_ext(void) { return PyModule_Create(&m); }
    """))
    so = tmp_path / ("fa3_fake_ext" + sysconfig.get_config_var("EXT_SUFFIX"))
    r = subprocess.run([cc, "-shared", "-fPIC", f"-DFWD={'fns' if fwd else 'NULL'}", f"-I{inc}", str(src), "-o", str(so)],
                       capture_output=True)
    return so if r.returncode == 0 else None


def test_a_module_backed_by_its_distribution_and_extension_is_accepted(tmp_path, monkeypatch):
    # the positive control: the check can pass, so the refusals above are about what they name
    so = _build_ext(tmp_path)
    if so is None:
        pytest.skip("no C compiler or Python headers to build a tiny extension")
    _fake_dist(tmp_path, "import fa3_fake_ext\n" + ENTRY, record_extra=[so])
    ok, why = _probe(tmp_path, monkeypatch)
    assert ok, why


def test_a_distribution_whose_extension_has_no_fa3_forward_is_not_fa3(tmp_path, monkeypatch):
    # the same forged distribution as above, but its compiled library is just some library: not FA3
    so = _build_ext(tmp_path, fwd=False)
    if so is None:
        pytest.skip("no C compiler or Python headers to build a tiny extension")
    _fake_dist(tmp_path, "import fa3_fake_ext\n" + ENTRY, record_extra=[so])
    ok, why = _probe(tmp_path, monkeypatch)
    assert not ok and "no FA3 forward op" in why


# ---- in a fresh interpreter, the impostor a package --------------------------------------------------
PROBE = textwrap.dedent("""
    import json, sys
    from kernelseek.baselines import fa3_vllm, choose_why, FA3
    from kernelseek.baselines.flash_attn import is_real_fa3
    from kernelseek.scenarios import Scenario
    fa3_vllm.candidates = lambda: []                   # no vLLM FA3 library: only the interface path is left
    import flash_attn_interface                        # the impostor, importable and callable
    s = Scenario(name="t", batch=1, seqlen_q=64, seqlen_k=64, heads_q=4, heads_kv=4, head_dim=128, causal=True)
    picked, declined = choose_why("best", s)
    print(json.dumps({"real": is_real_fa3("flash_attn_interface"), "available": FA3().available(),
                      "picked": [b.name for b in picked], "declined": declined,
                      "file": flash_attn_interface.__file__}))
""")


def _package(root: Path, dist: str | None, ext: Path | None = None, version: str = "3.0.0") -> None:
    """flash_attn_interface/ (a package) in `root`, FA3's entry points, importing `ext` when given; with
    `dist`, a dist-info of that name claiming the package (RECORD with the right hashes, and the ext)."""
    pkg = root / "flash_attn_interface"
    pkg.mkdir()
    (pkg / "__init__.py").write_text((f"import {ext.name.split('.')[0]}\n" if ext else "") + ENTRY
                                     + f"__version__ = '{version}'\n")
    if dist is None:
        return
    info = root / f"{dist}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n")
    (info / "top_level.txt").write_text("flash_attn_interface\n")
    files = [pkg / "__init__.py"] + ([ext] if ext else [])
    lines = [f"{f.relative_to(root)},{_record_hash(f)},{f.stat().st_size}" for f in files]
    (info / "RECORD").write_text("\n".join(lines + [f"{info.name}/RECORD,,"]) + "\n")


def _run_probe(root: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(REPO)]), "KSEEK_FA3_LIB": str(root / "no.so")}
    r = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, cwd=root, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def _refused(out: dict, root: Path, words: str) -> None:
    assert out["file"].startswith(str(root))          # the impostor is what `import flash_attn_interface` got
    ok, why = out["real"]
    assert not ok and "not FlashAttention-3" in why and words in why, why
    ok, why = out["available"]
    assert not ok and "FA3 unavailable" in why and words in why
    assert "fa3" not in out["picked"] and words in out["declined"]["fa3"]


@pytest.mark.parametrize("dist, ext, words", [
    (None, False, "installed by no distribution"),                      # a bare package
    ("flash_attn_3", False, "no compiled extension"),                   # a forged FA3 dist-info, hashes right
    ("flash_attn", True, "installed by ['flash_attn'"),                 # another distribution's (FA2's name)
    ("flash_attn_3", True, "no FA3 forward op"),                        # forged, with a library that is not FA3's
])
def test_an_impostor_package_in_a_fresh_interpreter_is_never_fa3(tmp_path, dist, ext, words):
    so = _build_ext(tmp_path, fwd=False) if ext else None
    if ext and so is None:
        pytest.skip("no C compiler or Python headers to build a tiny extension")
    root = tmp_path / "site"
    root.mkdir()
    if so is not None:
        so = Path(shutil.move(str(so), str(root / so.name)))
    _package(root, dist, so)
    _refused(_run_probe(root), root, words)


def test_the_fresh_interpreter_probe_can_accept(tmp_path):
    # positive control for the probe above: the forged distribution whose library has FA3's `fwd` passes
    # (so the refusals there are about what they name, not about the subprocess)
    so = _build_ext(tmp_path, fwd=True)
    if so is None:
        pytest.skip("no C compiler or Python headers to build a tiny extension")
    root = tmp_path / "site"
    root.mkdir()
    _package(root, "flash_attn_3", Path(shutil.move(str(so), str(root / so.name))))
    out = _run_probe(root)
    assert out["real"] == [True, ""] and out["available"] == [True, ""]


def test_our_kernel_under_fa3s_name_outside_the_checkout_is_never_fa3(tmp_path):
    # the realistic impostor: tools/fa3tests_shim.py's flash_attn_interface (kernelseek.attention under FA3's
    # name, written for running FA3's own tests against our kernel), in a folder outside the checkout
    root = tmp_path / "fa3tests"
    r = subprocess.run([sys.executable, str(REPO / "tools" / "fa3tests_shim.py"), str(root)], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = _run_probe(root)
    _refused(out, root, "installed by no distribution")
