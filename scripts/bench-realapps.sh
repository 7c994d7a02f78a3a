#!/usr/bin/env bash
# Real applications side by side: no layer, memtrack (auto, and each mode),
# and gfxreconstruct's capture layer (its default page_guard memory
# tracking), on lavapipe, in the same run. Prints one table row per
# application and configuration: wall time (median of REPS runs) and its
# ratio to the run without any layer, trace size, peak resident memory, and
# memtrack's verify result. The figures in docs/benchmarks.md ("real
# applications") come from this script.
#
#   scripts/bench-realapps.sh BUILD_DIR [REPS]
# Environment: APPS (default: vkcube mpv-gpu-next mpv-gpu ffmpeg-scale
# ffmpeg-libplacebo), MODES (default: auto guard shadow scan copy);
# DAWN_ICD=path/to/lvp_icd.json (a lavapipe new enough for Dawn) with
# DAWN_LD_LIBRARY_PATH adds a Dawn (node webgpu) compute workload, run from
# DAWN_DIR (where `npm install webgpu` was done).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
REPS=${2:-3}
HERE=$(cd "$(dirname "$0")/.." && pwd)
MEMTRACK=$BUILD/bin/memtrack
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
apps=${APPS:-vkcube mpv-gpu-next mpv-gpu ffmpeg-scale ffmpeg-libplacebo}
if [ -n "${DAWN_ICD:-}" ]; then
  apps="$apps dawn"
  # ES modules resolve packages next to the script: run it from DAWN_DIR.
  cp "$HERE/tests/realapps/dawn-compute.mjs" "${DAWN_DIR:?DAWN_DIR: where npm install webgpu was run}/"
fi
modes=${MODES:-auto guard shadow scan copy}
DEV=$(vulkaninfo 2>/dev/null | sed -n 's/^[[:space:]]*deviceName *= *//p' | grep -m1 llvmpipe || true)
ffmpeg -hide_banner -loglevel error -f lavfi -i testsrc2=duration=3:size=1280x720:rate=30 \
  -c:v libx264 -pix_fmt yuv420p -g 30 "$TMP/video.mp4"

app_cmd() {
  case $1 in
    vkcube) echo xvfb-run -a -s "\"-screen 0 640x480x24\"" vkcube --c 3000 ;;
    mpv-*) echo env SHOT_DIR="$TMP" xvfb-run -a -s "\"-screen 0 1280x720x24\"" mpv --no-config \
             --vo=${1#mpv-} --gpu-api=vulkan --gpu-context=x11vk "--vulkan-device=\"$DEV\"" --hwdec=no \
             --no-audio --really-quiet "$TMP/video.mp4" ;;
    ffmpeg-scale) echo ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 -filter_hw_device vk \
             -i "$TMP/video.mp4" -vf "format=yuv420p,hwupload,scale_vulkan=w=640:h=360,hwdownload,format=yuv420p" \
             -f null - ;;
    ffmpeg-libplacebo) echo ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 -filter_hw_device vk \
             -i "$TMP/video.mp4" \
             -vf "format=yuv420p,hwupload,libplacebo=w=640:h=360:format=yuv420p,hwdownload,format=yuv420p" \
             -f null - ;;
    dawn) echo env VK_ICD_FILENAMES="$DAWN_ICD" LD_LIBRARY_PATH="${DAWN_LD_LIBRARY_PATH:-}" \
             node "$DAWN_DIR/dawn-compute.mjs" ;;
  esac
}

# run CONFIG APP: median wall seconds, peak RSS (KiB, the largest process),
# trace bytes, verify result, over REPS runs.
measure() {
  local config=$1 app=$2 cmd trace times=() rss=0 size=0 verify=-
  cmd=$(app_cmd "$app")
  for r in $(seq "$REPS"); do
    trace=$TMP/$app-$config.$r
    rm -f "$trace"* "$TMP/gfxr"*
    case $config in
      none) pre=(env) ;;
      gfxr) pre=(env VK_INSTANCE_LAYERS=VK_LAYER_LUNARG_gfxreconstruct GFXRECON_CAPTURE_FILE="$TMP/gfxr.gfxr"
                 GFXRECON_CAPTURE_FILE_TIMESTAMP=false) ;;
      *) pre=("$MEMTRACK" record --quiet -o "$trace" --mode "$config" --verify --) ;;
    esac
    local t0 t1
    t0=$(date +%s.%N)
    eval "/usr/bin/time -f %M -o \"$TMP/rss\" $(printf '%q ' "${pre[@]}") $cmd" >/dev/null 2>&1 || true
    t1=$(date +%s.%N)
    times+=("$(echo "$t1 - $t0" | bc)")
    local m
    m=$(tail -1 "$TMP/rss" 2>/dev/null || echo 0)
    [ "$m" -gt "$rss" ] 2>/dev/null && rss=$m
    case $config in
      none) ;;
      gfxr) size=$(stat -c %s "$TMP/gfxr.gfxr" 2>/dev/null || echo 0) ;;
      *) size=$(stat -c %s "$trace" 2>/dev/null || echo 0)
         set +e; "$MEMTRACK" verify "$trace" >/dev/null 2>&1; verify=$?; set -e ;;
    esac
  done
  local med
  med=$(printf '%s\n' "${times[@]}" | sort -n | sed -n "$(( (REPS + 1) / 2 ))p")
  echo "$med $rss $size $verify"
}

printf '| app | config | wall s | x no layer | trace | peak RSS | verify |\n|---|---|---|---|---|---|---|\n'
for app in $apps; do
  read -r base base_rss _ _ <<<"$(measure none "$app")"
  printf '| %s | no layer | %.2f | 1.00 | - | %d MiB | - |\n' "$app" "$base" $((base_rss / 1024))
  for config in $modes gfxr; do
    read -r t rss size v <<<"$(measure "$config" "$app")"
    case $v in 0) vt=OK ;; 3) vt="OK (incomplete)" ;; 4|-) vt=- ;; *) vt="FAILED ($v)" ;; esac
    printf '| %s | %s | %.2f | %.2f | %.1f MiB | %d MiB | %s |\n' "$app" \
      "$([ "$config" = gfxr ] && echo "gfxreconstruct" || echo "memtrack $config")" "$t" \
      "$(echo "$t / $base" | bc -l)" "$(echo "$size / 1048576" | bc -l)" $((rss / 1024)) "$vt"
  done
done
