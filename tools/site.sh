# Sourced by tools/h200.sh and tools/gpu_round.sh on the GPU machine: pyelftools (the constraint check
# needs it; the image lacks it) from the wheel carried in .whl/ (git-ignored), and FA4, FA3 and
# FlashInfer when staged.
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl pyelftools==0.33
if ls .whl/*.whl >/dev/null 2>&1; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl >/dev/null 2>&1
  export PYTHONPATH=/tmp/site${PYTHONPATH:+:$PYTHONPATH}
fi
[ -f /root/fa4/pythonpath ] && export PYTHONPATH=$PYTHONPATH:$(cat /root/fa4/pythonpath)
# FlashInfer, when staged (tools/flashinfer.sh stage); its JIT builds for sm_90a only, on all 16 cores
[ -f /root/flashinfer/pythonpath ] && export PYTHONPATH=$PYTHONPATH:$(cat /root/flashinfer/pythonpath)
export FLASHINFER_CUDA_ARCH_LIST=${FLASHINFER_CUDA_ARCH_LIST:-9.0a} MAX_JOBS=${MAX_JOBS:-16}
# its Hopper kernels include curand_kernel.h: from the carried headers when the toolkit has none
[ -f /usr/local/cuda/include/curand_kernel.h ] || [ ! -d /root/flashinfer/curand/include ] || \
  export FLASHINFER_EXTRA_CUDAFLAGS="-I/root/flashinfer/curand/include"
export PYTHONPATH=.${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
export KSEEK_CACHE_DIR=${KSEEK_CACHE_DIR:-/root/kseek-cache}
[ -f .fa3/_vllm_fa3_C.abi3.so.xz ] && bash tools/fa3.sh stage >/dev/null   # FA3 for the fa3 baseline, if carried
