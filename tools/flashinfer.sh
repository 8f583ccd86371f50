#!/usr/bin/env bash
# FlashInfer for the `flashinfer` baseline (kernelseek/baselines/flashinfer.py). The GPU machine has no
# package index and one call carries at most 64 MiB beside the repository (~16 MB), so the wheels travel
# in git-ignored parts over back-to-back calls (the machine is released after ~30 s idle):
#   bash tools/flashinfer.sh prepare   here: download flashinfer-python 0.7.2.post1 (62 MB, pure Python + its
#                                      JIT sources) and the deps the GPU image lacks (apache-tvm-ffi cp312,
#                                      nvidia-ml-py, einops, tabulate, requests and its deps, tqdm,
#                                      packaging; cuRAND's headers); split: .fi-a (first half + deps, ~35 MB),
#                                      .fi-b (second half)
#   bash tools/flashinfer.sh aot       here, optional and slow (minutes per module on 2 cores): build the JIT
#                                      modules bench26 and the production grid use for sm_90a into .fi-c/
#                                      (tools/flashinfer_aot.py), so the H200 loads them instead of compiling.
#                                      Modules the H200 built (tools/gpu_peers.sh stage2 returns them in
#                                      $OUT/fi-aot) are copied into .fi-c/aot by hand. Session 8 did so: .fi-c/aot
#                                      holds the FA3-template (_sm90) hd128 and hd64 prefill modules (H200, 150 s +
#                                      143 s there) and an FA2-template hd128 module under its plain name, which
#                                      FlashInfer 0.7.2 never loads (it loads the "_kv_stride_equal" build; the
#                                      adapter names that one since session 9). `python3 tools/flashinfer_aot.py
#                                      --list` lists the modules the adapter asks for; those missing from .fi-c
#                                      (session 8: hd256, FA2 decode, window, softcap) are compiled by stage2
#   bash tools/flashinfer.sh stage     on the GPU machine, once per carried part (carry .fi-a, then .fi-b, then
#                                      .fi-c if made; .fi-d: more prebuilt modules, aot/NAME/NAME.so like .fi-c's,
#                                      in a call of their own when one call cannot take them beside .fi-b and
#                                      .fi-c (64 MiB per call), before or after): collects the parts in /root/flashinfer; when both halves
#                                      are there, rebuilds and checks the wheel, unpacks it and each missing dep
#                                      into /root/flashinfer/site, drops prebuilt modules into
#                                      site/flashinfer/data/aot/, and checks `import flashinfer`.
#                                      tools/site.sh then puts /root/flashinfer/site on PYTHONPATH.
# flashinfer-cubin is not needed: its cubins are trtllm-gen kernels (Blackwell); on Hopper the decode and
# prefill kernels are FlashInfer's FA2/FA3 templates, JIT-compiled with the image's nvcc 13.0 + ninja when
# no prebuilt module is there (tens of seconds each on 16 cores, cached in /root/.cache/flashinfer).
set -euo pipefail
cd "$(dirname "$0")/.."
VER=0.7.2.post1
WHEEL=flashinfer_python-$VER-py3-none-any.whl
DEST=${FI_DEST:-/root/flashinfer}   # where the GPU machine keeps it (tests: a temporary folder)
dl() { python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
         --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
         --platform manylinux2014_x86_64 "$@"; }
case "${1:-}" in
  prepare)
    [ -f .fi-b/part.ab ] && { du -sh .fi-a .fi-b; exit 0; }
    tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
    dl -d "$tmp" flashinfer-python==$VER
    mkdir -p .fi-a/deps .fi-b
    dl -d .fi-a/deps apache-tvm-ffi==0.1.15.post2 nvidia-ml-py einops tabulate requests urllib3 idna certifi \
      charset-normalizer tqdm packaging
    # FlashInfer's Hopper kernels include curand_kernel.h (through CUTLASS); a toolkit without cuRAND's
    # headers (this machine's; maybe the GPU image's) gets them from cuRAND's cu13 wheel (2 MB of headers)
    dl -d "$tmp" nvidia-curand==10.4.4.72
    mkdir -p .fi-a/curand/include
    python3 -c "import sys,zipfile,os; z=zipfile.ZipFile(sys.argv[1]); [open('.fi-a/curand/include/'+os.path.basename(n),'wb').write(z.read(n)) for n in z.namelist() if '/include/' in n and n.endswith('.h')]" "$tmp"/nvidia_curand-*.whl
    split -n 2 -d "$tmp/$WHEEL" "$tmp/part."
    mv "$tmp/part.00" .fi-a/part.aa; mv "$tmp/part.01" .fi-b/part.ab
    (cd "$tmp" && md5sum $WHEEL | awk '{print $1}') > .fi-a/wheel.md5
    du -sh .fi-a .fi-b ;;
  aot)
    # flashinfer's JIT runs here under this machine's Python (3.11): unpack the wheel and a cp311 tvm-ffi
    [ -f .fi-b/part.ab ] || bash "$0" prepare
    site=${FI_AOT_SITE:-/tmp/fi-aot-site}; mkdir -p "$site" .fi-c/aot /tmp/fi-aot-stub
    if [ ! -d "$site/flashinfer" ]; then
      cat .fi-a/part.aa .fi-b/part.ab > "$site/$WHEEL" && python3 -m zipfile -e "$site/$WHEEL" "$site"
      python3 -m pip download -q --no-deps --only-binary=:all: -d "$site/w" apache-tvm-ffi==0.1.15.post2 nvidia-ml-py
      for w in "$site"/w/*.whl; do python3 -m zipfile -e "$w" "$site"; done
    fi
    # the modules link -lcuda but call only the runtime API: an empty libcuda.so.1 stands in for the driver here
    echo "void kseek_libcuda_stub(void){}" > /tmp/fi-aot-stub/s.c
    gcc -shared -fPIC -Wl,-soname,libcuda.so.1 -o /tmp/fi-aot-stub/libcuda.so /tmp/fi-aot-stub/s.c
    inc=""; [ -f "${CUDA_HOME:-/usr/local/cuda}/include/curand_kernel.h" ] || inc="-I$PWD/.fi-a/curand/include"
    PYTHONPATH=$site FLASHINFER_EXTRA_LDFLAGS=-L/tmp/fi-aot-stub FLASHINFER_CUDA_ARCH_LIST=9.0a FLASHINFER_EXTRA_CUDAFLAGS="$inc" \
      FLASHINFER_WORKSPACE_BASE=/tmp/fi-aot-ws CUDA_HOME=${CUDA_HOME:-/usr/local/cuda} MAX_JOBS=${MAX_JOBS:-2} \
      python3 tools/flashinfer_aot.py .fi-c/aot "${@:2}"
    du -sh .fi-c ;;
  stage)
    mkdir -p $DEST
    for d in .fi-a .fi-b .fi-c .fi-d; do [ -d $d ] && cp -r $d/. $DEST/; done
    cd $DEST
    if [ ! -f site/flashinfer/__init__.py ]; then    # once per machine: a later call only adds modules
      for p in part.aa part.ab; do
        [ -f $p ] || { echo "flashinfer: staged $(ls part.* 2>/dev/null | tr '\n' ' '); next, the call that carries the next part"; exit 0; }
      done
      cat part.aa part.ab > $WHEEL
      [ "$(md5sum $WHEEL | awk '{print $1}')" = "$(cat wheel.md5)" ] || { echo "flashinfer: reassembled wheel is corrupt"; exit 1; }
      rm -rf site && mkdir site && python3 -m zipfile -e $WHEEL site && rm -f part.aa part.ab
      for w in deps/*.whl; do                  # only what the image lacks: its own packages stay in charge
        mod=$(python3 - "$w" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
top = next((n for n in z.namelist() if n.endswith("top_level.txt")), None)
names = z.read(top).decode().split() if top else sorted({n.split("/")[0] for n in z.namelist() if ".dist-info" not in n})
print(",".join(n.removesuffix(".py") for n in names if n.removesuffix(".py").isidentifier()))
EOF
)
        python3 -c "import $mod" 2>/dev/null || { python3 -m zipfile -e "$w" site; echo "flashinfer: added $(basename "$w")"; }
      done
    fi
    if [ -d aot ]; then mkdir -p site/flashinfer/data/aot && cp -r aot/. site/flashinfer/data/aot/; fi
    echo "$DEST/site" > pythonpath
    PYTHONPATH=$DEST/site python3 -c "import flashinfer, os; print('flashinfer: ready', flashinfer.__version__, os.path.dirname(flashinfer.__file__))"
    echo "flashinfer: prebuilt modules: $(ls site/flashinfer/data/aot 2>/dev/null | wc -l)" ;;
  *) echo "usage: bash tools/flashinfer.sh prepare|aot|stage" >&2; exit 2 ;;
esac
