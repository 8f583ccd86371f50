# Sourced by the tools/gpu_*.sh scripts that run on the GPU machine, after they set OUT: everything under
# $OUT comes back as $OUT/bundle.tgz (tools/bundle.sh), the carried wheels and FA3 staged (tools/site.sh),
# the builds carried in .kseek-cache copied into the machine's cache, T0 and log() for elapsed times, and
# $OUT/device.txt (GPU, driver, clocks, git revision).
mkdir -p "$OUT"
source tools/bundle.sh
export KSEEK_GIT_REV=${KSEEK_GIT_REV:-unknown} KSEEK_FLASHINFER_JIT=0
source tools/site.sh
[ -d .kseek-cache ] && mkdir -p "$KSEEK_CACHE_DIR" && cp -rn .kseek-cache/. "$KSEEK_CACHE_DIR"/ 2>/dev/null
T0=$(date +%s)
log() { echo "=== $* (+$(( $(date +%s) - T0 )) s)"; }
# seconds left before TOTAL_S (default 540: the call's limit less the bundle), and a step's timeout
# capped to what is left (a script must end, and pack its bundle, before the call is cut)
left() { echo $(( ${TOTAL_S:-540} - ($(date +%s) - T0) )); }
cap() { local l; l=$(left); [ "$1" -lt "$l" ] && echo "$1" || echo $(( l > 5 ? l - 5 : 1 )); }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee "$OUT/device.txt"
echo "git $KSEEK_GIT_REV" | tee -a "$OUT/device.txt"
