"""kernelseek.sass_identity's normalisation and comparison on listings written like cuobjdump's: what
must match (the same code at other addresses, under other names) and what must not (one register, one
stall count)."""
from __future__ import annotations

import hashlib

from kernelseek import sass_identity as si

# One kernel as cuobjdump -sass prints it (instruction line, then the control word's line).
LISTING = """
\t\tFunction : _ZN3fa310fwd_kernelI13__nv_bfloat16Li64ELi64ELi128ELi2ELb0EEEvNS_4ArgsE
\t.headerflags\t@"EF_CUDA_ACCELERATORS EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                         /* 0x00000a00ff017b82 */
                                                                                  /* 0x000fe20000000800 */
        /*0010*/                   S2R R2, SR_TID.X ;                             /* 0x0000000000027919 */
                                                                                  /* 0x000e620000002100 */
        /*0020*/               @P1 BRA 0x40 ;                                     /* 0x0000000000041947 */
                                                                                  /* 0x000fea0003800000 */
        /*0030*/                   CALL.REL.NOINC 0x40 ;                          /* 0x0000000000007944 */
                                                                                  /* 0x002fea0003c00000 */
        /*0040*/                   EXIT ;                                         /* 0x000000000000794d */
                                                                                  /* 0x000fea0003800000 */
"""


def _parse(text: str) -> list[tuple]:
    return si.parse_listing(text)["_ZN3fa310fwd_kernelI13__nv_bfloat16Li64ELi64ELi128ELi2ELb0EEEvNS_4ArgsE"]


def _sha(lines: list[str]) -> str:
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def test_parse_keeps_text_and_both_encoding_words():
    insns = _parse(LISTING)
    assert [i[1] for i in insns] == ["LDC R1, c[0x0][0x28]", "S2R R2, SR_TID.X", "@P1 BRA 0x40",
                                     "CALL.REL.NOINC 0x40", "EXIT"]
    assert insns[0][2:] == ("0x00000a00ff017b82", "0x000fe20000000800")


def test_branch_targets_become_labels_and_keep_only_control_bits():
    lines = si.normalise(_parse(LISTING))
    assert lines[2] == f"@P1 BRA L0 ; ctrl {0x000fea0003800000 >> 41:#x}"
    assert lines[3].startswith("CALL.REL.NOINC L0 ; ctrl")
    assert lines[0] == "LDC R1, c[0x0][0x28] ; 0x00000a00ff017b82 0x000fe20000000800"


def test_same_code_at_other_addresses_hashes_the_same():
    moved = LISTING.replace("/*00", "/*10").replace("0x40 ;", "0x1040 ;")
    assert _sha(si.normalise(_parse(moved))) == _sha(si.normalise(_parse(LISTING)))


def test_one_register_or_one_stall_count_changes_the_hash():
    base = _sha(si.normalise(_parse(LISTING)))
    other_reg = LISTING.replace("S2R R2, SR_TID.X", "S2R R3, SR_TID.X")
    other_stall = LISTING.replace("0x000e620000002100", "0x000e640000002100")
    assert _sha(si.normalise(_parse(other_reg))) != base
    assert _sha(si.normalise(_parse(other_stall))) != base


def test_key_drops_namespaces_so_a_moved_kernel_still_matches():
    assert si.key("void (anonymous namespace)::naive_fwd_kernel<__half, __half>(kseek_params, bool)") == \
        si.key("void naive::naive_fwd_kernel<__half, __half>(kseek_params, bool)") == \
        "void naive_fwd_kernel<__half, __half>(kseek_params, bool)"


def test_compare_names_each_status():
    ref = {"a": {"sha256": "1", "resources": {"REG": 32}, "instructions": 5},
           "b": {"sha256": "2", "resources": {"REG": 32}, "instructions": 5},
           "c": {"sha256": "3", "resources": {"REG": 32}, "instructions": 5},
           "d": {"sha256": "4", "resources": {}, "instructions": 5}}
    new = {"a": {"sha256": "1", "resources": {"REG": 32}, "instructions": 5},
           "b": {"sha256": "9", "resources": {"REG": 32}, "instructions": 6},
           "c": {"sha256": "3", "resources": {"REG": 40}, "instructions": 5},
           "e": {"sha256": "5", "resources": {}, "instructions": 5}}
    got = {r["key"]: r["status"] for r in si.compare(ref, new)}
    assert got == {"a": "same", "b": "differs", "c": "resources", "d": "only old", "e": "only new"}
    assert si.table(si.compare(ref, new)).splitlines()[-1] == "1 differs, 1 only new, 1 only old, 1 resources, 1 same"
