#!/usr/bin/env bash
# FlashAttention-3 itself for the `fa3` baseline (kernelseek/baselines/fa3_vllm.py): vLLM's wheel
# carries FA3's Hopper kernels prebuilt as one library on torch's stable ABI (loads with torch 2.11).
#   bash tools/fa3.sh prepare   here: download the wheel once, keep the library, xz it into .fa3/ (~8 MB,
#                               git-ignored); one part: it travels in any call beside the repository
#   bash tools/fa3.sh stage     on the GPU machine (carry .fa3): unpack to /root/fa3 (about a second);
#                               the fa3 baseline finds it there. Redo on every fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
LIB=_vllm_fa3_C.abi3.so
case "${1:-}" in
  prepare)
    git check-ignore -q .fa3/_vllm_fa3_C.abi3.so.xz || { echo "tools/fa3.sh: .fa3 must be git-ignored (.gitignore)" >&2; exit 1; }
    [ -f .fa3/$LIB.xz ] && { du -sh .fa3; exit 0; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 -d "$tmp" vllm==0.33.0
    mkdir -p .fa3
    python3 -c "import glob,sys,zipfile; z=zipfile.ZipFile(glob.glob(sys.argv[1]+'/vllm-*.whl')[0]); open('.fa3/$LIB','wb').write(z.read('vllm/vllm_flash_attn/$LIB'))" "$tmp"
    xz -9 -T2 -f .fa3/$LIB
    du -sh .fa3 ;;
  stage)
    mkdir -p /root/fa3
    [ -f /root/fa3/$LIB ] || xz -dc .fa3/$LIB.xz > /root/fa3/$LIB
    echo /root/fa3/$LIB ;;
  *) echo "usage: bash tools/fa3.sh prepare|stage" >&2; exit 2 ;;
esac
