"""tools/flashinfer.sh stage, on the CPU with a small stand-in wheel: the parts carried over separate calls
are collected, the wheel is rebuilt only when both halves are there and its md5 matches, only the deps
the machine lacks are unpacked, prebuilt modules land in flashinfer/data/aot, and `import flashinfer`
is checked from the staged folder."""
import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
WHEEL = "flashinfer_python-0.7.2.post1-py3-none-any.whl"


def _wheel(path: Path, files: dict) -> bytes:
    with zipfile.ZipFile(path, "w") as z:
        for name, text in files.items():
            z.writestr(name, text)
    return path.read_bytes()


def _layout(tmp: Path, md5: str | None = None) -> Path:
    """A checkout with tools/flashinfer.sh and the three parts prepare/aot would make."""
    root = tmp / "repo"
    (root / "tools").mkdir(parents=True)
    shutil.copy(REPO / "tools" / "flashinfer.sh", root / "tools")
    data = _wheel(tmp / WHEEL, {"flashinfer/__init__.py": "__version__ = '0.7.2.post1'\n" + "#" * 5000,
                                "flashinfer_python-0.7.2.post1.dist-info/METADATA": "Name: flashinfer-python\n"})
    half = len(data) // 2
    for d, part in ((".fi-a", "part.aa"), (".fi-b", "part.ab")):
        (root / d).mkdir()
        (root / d / part).write_bytes(data[:half] if part == "part.aa" else data[half:])
    (root / ".fi-a" / "wheel.md5").write_text((md5 or hashlib.md5(data).hexdigest()) + "\n")
    deps = root / ".fi-a" / "deps"
    deps.mkdir()
    _wheel(deps / "kseek_absent_dep-1.0-py3-none-any.whl", {"kseek_absent_dep/__init__.py": "X = 1\n",
                                                           "kseek_absent_dep-1.0.dist-info/top_level.txt": "kseek_absent_dep\n"})
    _wheel(deps / "json_shadow-1.0-py3-none-any.whl", {"json/__init__.py": "raise ImportError('shadowed')\n"})
    mod = "batch_prefill_x"
    (root / ".fi-c" / "aot" / mod).mkdir(parents=True)
    (root / ".fi-c" / "aot" / mod / f"{mod}.so").write_bytes(b"\x7fELF stand-in")
    return root


def _stage(root: Path, dest: Path, *parts: str):
    """One call: only `parts` are carried (the others are removed from the checkout first)."""
    for d in (".fi-a", ".fi-b", ".fi-c", ".fi-d"):
        if d not in parts and (root / d).exists():
            shutil.move(str(root / d), str(root.parent / (d + ".away")))
        elif d in parts and not (root / d).exists():
            shutil.move(str(root.parent / (d + ".away")), str(root / d))
    env = {**os.environ, "FI_DEST": str(dest), "PYTHONPATH": ""}
    return subprocess.run(["bash", str(root / "tools" / "flashinfer.sh"), "stage"], capture_output=True, text=True,
                          env=env, timeout=120)


def test_parts_over_three_calls_make_an_importable_flashinfer(tmp_path):
    root, dest = _layout(tmp_path), tmp_path / "dest"
    r = _stage(root, dest, ".fi-a")
    assert r.returncode == 0 and "next, the call that carries the next part" in r.stdout
    assert not (dest / "site").exists()
    r = _stage(root, dest, ".fi-b", ".fi-c")
    assert r.returncode == 0, r.stderr
    assert "flashinfer: ready 0.7.2.post1" in r.stdout and "prebuilt modules: 1" in r.stdout
    assert "added kseek_absent_dep-1.0" in r.stdout and "json_shadow" not in r.stdout   # json exists: skipped
    site = dest / "site"
    assert (site / "kseek_absent_dep" / "__init__.py").is_file() and not (site / "json").exists()
    assert (site / "flashinfer" / "data" / "aot" / "batch_prefill_x" / "batch_prefill_x.so").is_file()
    assert (dest / "pythonpath").read_text().strip() == str(site)
    out = subprocess.run([sys.executable, "-c", "import flashinfer; print(flashinfer.__file__)"], capture_output=True,
                         text=True, env={**os.environ, "PYTHONPATH": str(site)})
    assert out.stdout.startswith(str(site))


def test_a_corrupt_reassembly_is_refused(tmp_path):
    root, dest = _layout(tmp_path, md5="0" * 32), tmp_path / "dest"
    _stage(root, dest, ".fi-a")
    r = _stage(root, dest, ".fi-b")
    assert r.returncode == 1 and "reassembled wheel is corrupt" in r.stdout
    assert not (dest / "site" / "flashinfer").exists()


def test_a_later_call_adds_modules_to_a_staged_flashinfer(tmp_path):
    root, dest = _layout(tmp_path), tmp_path / "dest"
    _stage(root, dest, ".fi-a")
    _stage(root, dest, ".fi-b")
    assert not (dest / "site" / "flashinfer" / "data" / "aot").exists()
    r = _stage(root, dest, ".fi-c")                       # stage2 again, or a call carrying only modules
    assert r.returncode == 0 and "prebuilt modules: 1" in r.stdout, r.stdout + r.stderr


def test_more_modules_in_a_call_of_their_own_before_the_wheel(tmp_path):
    # .fi-d (modules that do not fit beside .fi-b and .fi-c) carried between stage1 and stage2
    root, dest = _layout(tmp_path), tmp_path / "dest"
    mod = root / ".fi-d" / "aot" / "batch_prefill_y_sm90"
    mod.mkdir(parents=True)
    (mod / "batch_prefill_y_sm90.so").write_bytes(b"\x7fELF stand-in")
    _stage(root, dest, ".fi-a")
    r = _stage(root, dest, ".fi-d")
    assert r.returncode == 0 and "next, the call that carries the next part" in r.stdout, r.stdout + r.stderr
    r = _stage(root, dest, ".fi-b", ".fi-c")
    assert r.returncode == 0 and "prebuilt modules: 2" in r.stdout, r.stdout + r.stderr
    assert (dest / "site" / "flashinfer" / "data" / "aot" / "batch_prefill_y_sm90" / "batch_prefill_y_sm90.so").is_file()
