"""abi.KernelLib.last_path: kseek.h's optional kseek_last_path, read from a real shared library (gcc)."""
import shutil
import subprocess

import pytest

from kernelseek import abi

SRC = """
static int code = -1;
int kseek_fwd(const void* p, void* stream) { (void)p; (void)stream; return 0; }
int kseek_last_path(void) { return code; }
void set_code(int c) { code = c; }
"""


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    d = tmp_path_factory.mktemp("pathlib")
    (d / "k.c").write_text(SRC)
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(d / "k.so"), str(d / "k.c")], check=True)
    return abi.load(d / "k.so")


def test_codes_map_to_names_and_none_before_a_call(lib):
    assert lib.last_path() is None                       # -1: no kseek_fwd yet
    for code, name in abi.PATH_NAMES.items():
        lib.dll.set_code(code)
        assert lib.last_path() == name
    lib.dll.set_code(7)
    assert lib.last_path() == "code 7"


def test_a_kernel_without_the_symbol_says_nothing(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    (tmp_path / "k.c").write_text("int kseek_fwd(const void* p, void* s) { return 0; }\n")
    subprocess.run([cc, "-shared", "-fPIC", "-o", str(tmp_path / "k.so"), str(tmp_path / "k.c")], check=True)
    assert abi.load(tmp_path / "k.so").last_path() is None
