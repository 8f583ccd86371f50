"""The GPU machine's staging (tools/campaign_stage.sh) and the one-call script (tools/gpu_campaign.sh):
shell syntax and shellcheck where it is installed; the prepared wheel folder; staging into a bare
CPython 3.12 (like the GPU image, it has none of the packages) with what imports printed."""
import glob
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPTS = [REPO / "tools" / "campaign_stage.sh", REPO / "tools" / "gpu_campaign.sh"]
WHEELS = REPO / ".campaign-wheels"
LEFT_OUT = ("numpy-", "torch-", "matplotlib-", "debugpy-", "jedi-", "parso-")


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_scripts_parse_and_pass_shellcheck(script):
    assert subprocess.run(["bash", "-n", str(script)], capture_output=True).returncode == 0
    sc = shutil.which("shellcheck")
    if sc is None:
        pytest.skip("shellcheck is not installed (bash -n passed)")
    p = subprocess.run([sc, "-S", "warning", str(script)], capture_output=True, text=True)
    assert p.returncode == 0, p.stdout


def test_unknown_verb_is_a_usage_error():
    p = subprocess.run(["bash", str(SCRIPTS[0]), "nope"], capture_output=True, text=True)
    assert p.returncode == 2 and "usage" in p.stderr


def _prepared():
    if not (WHEELS / "MANIFEST").is_file():
        pytest.skip("run `bash tools/campaign_stage.sh prepare` first (it downloads the wheels)")
    return sorted(p.name for p in WHEELS.glob("*.whl"))


def test_prepared_wheels_fit_one_carry_and_leave_out_the_images_own():
    wheels = _prepared()
    names = {w.split("-")[0].lower() for w in wheels}
    for need in ("anthropic", "papermill", "nbclient", "nbformat", "ipykernel", "jupyter_client", "pyzmq",
                 "tornado", "traitlets", "dask", "distributed", "pyelftools", "pydantic", "pydantic_core", "jiter",
                 "pandas"):
        assert need in names, need
    assert not [w for w in wheels if w.lower().startswith(LEFT_OUT)]
    assert all("cp312" in w or "py3" in w or "py2.py3" in w or "abi3" in w for w in wheels)
    size = sum((WHEELS / w).stat().st_size for w in wheels)
    assert size < 40 * 2**20            # beside the ~18 MB repository, under one call's 64 MiB


def test_stage_into_a_bare_python_312_prints_what_imports(tmp_path):
    _prepared()
    cands = [shutil.which("python3.12"), *glob.glob("/root/.pyenv/versions/3.12*/bin/python3.12")]
    py = next((c for c in cands if c and subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == (3, 12)"],
                                                        capture_output=True).returncode == 0), None)
    if py is None:
        pytest.skip("no CPython 3.12 here (the wheels are cp312)")
    env = dict(os.environ, KSEEK_CAMPAIGN_SITE=str(tmp_path / "site"), PYTHON=py)
    env.pop("PYTHONPATH", None)
    p = subprocess.run(["bash", str(SCRIPTS[0]), "stage"], capture_output=True, text=True, env=env, timeout=600)
    out = p.stdout
    for mod in ("anthropic", "httpx2", "pydantic", "papermill", "nbclient", "ipykernel", "zmq", "tornado", "dask",
                "distributed", "elftools", "yaml"):
        assert f"ok      {mod} " in out, (mod, out[-3000:])
    assert "ok     python3 kernel:" in out and "ipykernel_launcher" in out
    # a module the folder does not carry and this Python lacks (numpy, on a bare 3.12) is said plainly
    assert ("MISSING numpy:" in out) == (subprocess.run([py, "-c", "import numpy"]).returncode != 0)
    assert "bwrap:" in out or "MISSING bwrap" in out
    # papermill starts a Jupyter kernel from the staged folder alone (no debugpy, jedi or parso)
    import nbformat
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell("x = 1", metadata={"tags": ["parameters"]}),
                nbformat.v4.new_code_cell("import anthropic, dask, distributed, IPython\nprint('kernel', x, anthropic.__version__)")]
    nbformat.write(nb, tmp_path / "t.ipynb")
    code = ("import json, papermill as pm, sys; pm.execute_notebook(sys.argv[1], sys.argv[2], parameters={'x': 7}, "
            "kernel_name='python3', language='python', progress_bar=False)")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "site"))
    p = subprocess.run([py, "-c", code, str(tmp_path / "t.ipynb"), str(tmp_path / "o.ipynb")], env=env,
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "kernel 7 2.14.0" in (tmp_path / "o.ipynb").read_text()
