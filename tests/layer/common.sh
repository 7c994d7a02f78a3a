# Sourced by the layer tests: $1 = build directory. Sets MEMTRACK, SAMPLE,
# a scratch directory, and the sanitizer runtime to preload into
# applications that were not built with it (vkcube).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
MEMTRACK=$BUILD/bin/memtrack
SAMPLE=$BUILD/bin/memtrack-sample
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
PRELOAD=
if [ -n "${MT_SANITIZE:-}" ]; then
  case "$MT_SANITIZE" in
    *address*) PRELOAD=$(${CC:-cc} -print-file-name=libasan.so) ;;
    *thread*)  PRELOAD=$(${CC:-cc} -print-file-name=libtsan.so) ;;
  esac
fi
# Mesa and the loader are not ours: their leaks and their (uninstrumented)
# locking are not our findings.
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export TSAN_OPTIONS="${TSAN_OPTIONS:-} suppressions=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/tsan.supp"
fail() { echo "FAIL: $*" >&2; exit 1; }
# The Vulkan validation layer, stacked under ours by `memtrack record`
# (where it is installed: the GPU machine has only the driver).
# has_layer JSON: an explicit layer's manifest is installed.
has_layer() {
  local d
  for d in /usr/share/vulkan/explicit_layer.d /usr/local/share/vulkan/explicit_layer.d; do
    [ -f "$d/$1" ] && return 0
  done
  return 1
}
VALIDATION=0
has_layer VkLayer_khronos_validation.json && VALIDATION=1
if [ $VALIDATION = 1 ]; then
  export VK_INSTANCE_LAYERS=VK_LAYER_KHRONOS_validation
else
  echo "note: the Vulkan validation layer is not installed: running without it" >&2
fi
check_no_validation_errors() {
  if grep -E "Validation (Error|Warning)|VUID-" "$1" >/dev/null; then
    grep -E "Validation (Error|Warning)|VUID-" "$1" | head -5 >&2
    fail "the validation layer reported problems (see above)"
  fi
}
