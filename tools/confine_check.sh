#!/usr/bin/env bash
# Confinement on the GPU machine (through the device tool), from the repository root:
#   bash tools/confine_check.sh
# The image may lack bubblewrap. Carry the binary of this machine (Debian 12 bwrap 0.8.0, needs glibc
# 2.34, libselinux1, libcap2, libpcre2-8; Ubuntu 24.04 has them): here, once,
#   mkdir -p tools/bin && cp "$(command -v bwrap)" tools/bin/bwrap      (tools/bin/ is git-ignored)
# and name tools/bin in the run's `carry`. kernelseek.confine finds tools/bin/bwrap by itself
# ($KSEEK_BWRAP or PATH win when set). It prints whether bwrap can make its namespaces there (gVisor
# and Firecracker differ), runs the confinement tests (no GPU needed) and the GPU test comparing a
# confined evaluation with a plain one, then times both on smoke for the harness overhead.
set -uo pipefail
cd "$(dirname "$0")/.."
source tools/site.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
uname -r; id -u
python3 -c "from kernelseek.confine import find_bwrap, unavailable, toolchain, gpu_devices; \
print('bwrap:', find_bwrap()); print('problem:', unavailable()); print('toolchain:', toolchain()); \
print('gpu devices:', gpu_devices())"
# the loop's tests need the anthropic client (carry its wheels, see tools/site.sh); the rest do not
LOOP="tests/unit/test_confine_attacks.py tests/unit/test_agent_sandbox.py tests/unit/test_redact.py"
python3 -c "import anthropic" 2>/dev/null || { echo "no anthropic here: skipping $LOOP"; LOOP=""; }
python3 -m pytest -q -p no:cacheprovider $LOOP tests/unit/test_confine_candidate.py tests/unit/test_ledger.py \
  2>&1 | tail -15
python3 -m pytest -q -p no:cacheprovider -m gpu tests/gpu/test_confine_gpu.py 2>&1 | tail -15
for mode in "" "--confine"; do
  python3 -m kernelseek eval kernels/naive_fwd.cu --grid smoke --baseline best --no-progress --runs-dir runs/confine $mode | tail -4
done
tar czf "$OUT/runs-confine.tgz" runs/confine 2>/dev/null; ls -la "$OUT"
