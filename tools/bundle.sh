# Sourced by the tools/gpu_*.sh scripts right after they set OUT: the device tool brings back only a few
# files from $OUT (8 in session 10: two calls lost serving.json that way), so the script writes into a
# private folder and the whole of it is packed into $OUT/bundle.tgz when the script exits (unpack with
# `tar xzf bundle.tgz`); its stdout still comes back as the call's log. A script run from another one
# that already bundles (KSEEK_BUNDLED=1) writes where it is told.
if [ "${KSEEK_BUNDLED:-0}" != 1 ]; then
  export KSEEK_BUNDLED=1
  BUNDLE_RET=$OUT
  OUT=$(mktemp -d /tmp/kseek_bundle.XXXXXX)
  trap 'tar czf "$BUNDLE_RET/bundle.tgz" -C "$OUT" . 2>/dev/null; echo "(outputs packed: $BUNDLE_RET/bundle.tgz)"' EXIT
fi
