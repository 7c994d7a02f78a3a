#!/usr/bin/env bash
# Real applications nobody here wrote, on lavapipe, each in every capture
# mode: the application's output under `memtrack record` is identical to a
# run without the layer (screenshots or frame hashes), and `memtrack verify`
# passes (mismatches classified as races or in-flight device work are
# reported, not failures; a lost write fails).
#   vkcube           300 frames under Xvfb (covered by test_layer_vkcube for
#                    its output; here: verify in every mode)
#   gfxrecon-replay  a 20-frame vkcube capture kept in this folder, screenshots
#                    of frames 5, 10, 15 and 20
#   mpv              a generated 720p H.264 video, --vo=gpu-next (libplacebo)
#                    and --vo=gpu, screenshots of the rendered window at 0.5, 1
#                    and 2 s
#   ffmpeg           Vulkan filters: hwupload,scale_vulkan,hwdownload and
#                    libplacebo; frame hashes (framemd5)
#   vkcube-layers    vkcube with other layers around ours: MangoHud and
#                    vkBasalt (its CAS effect) above it, the validation
#                    layer below it; verify in every mode
#   vkd3d-gears      a Direct3D 12 program on vkd3d, killed with SIGTERM
#                    after 4 s (it never ends by itself); verify in every mode
#   glmark2-zink     OpenGL through Mesa's zink (GL on Vulkan: persistent
#                    coherent maps, its own suballocator, a submit thread),
#                    glmark2's scenes with --validate; its per-scene
#                    validation results
#   vkcube-gfxrecon  vkcube under gfxreconstruct's capture layer, which sits
#                    below ours and guards the memory it hands up with
#                    mprotect and a SIGSEGV handler of its own; screenshots
#                    of its capture's replay
#   chromium-webgl   headless Chromium, WebGL through ANGLE on Vulkan in its
#                    GPU process: webgl.html's uploads, draws and read-backs;
#                    the page's digest of what it read back
#   vkcube-renderdoc vkcube under RenderDoc's capture layer (above ours),
#                    frame 30 captured by number (vkcube-renderdoc.sh): the
#                    capture's thumbnail and the hashes of its data blobs
#   gst-vulkan       GStreamer's Vulkan elements: a moving pattern teed into
#                    two streaming threads that upload, convert and read back
#                    frames (gst-vulkan.sh); the frames read back
# Each application runs in every mode with the default backend (uffd here),
# then in the modes that track (auto, guard, shadow) with the signal backend,
# the one NVIDIA's mappings and kernels before 6.7 get.
# Environment: REALAPPS_MODES, REALAPPS_SIGNAL_MODES, REALAPPS_APPS narrow the
# matrix (REALAPPS_SIGNAL_MODES= skips the signal pass).
set -euo pipefail
BUILD=$(cd "$1" && pwd)
HERE=$(cd "$(dirname "$0")" && pwd)
MEMTRACK=$BUILD/bin/memtrack
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
case "${MT_SANITIZE:-}" in
  *thread*|*address*)
    # None of these programs is instrumented; a sanitizer runtime preloaded
    # into them reports their own code. The layer's sanitizer coverage comes
    # from the instrumented sample and hostile applications.
    echo "SKIPPED under sanitizers: the real applications are not instrumented"; exit 77 ;;
esac
for tool in vkcube gfxrecon-replay mpv ffmpeg xvfb-run vkd3d-gears glmark2 chromium gst-launch-1.0 renderdoccmd unzip; do
  command -v $tool >/dev/null || { echo "FAIL: $tool is not installed (scripts/deps.sh installs it)" >&2; exit 1; }
done
export XDG_RUNTIME_DIR=$TMP/xdg
mkdir -m 700 "$XDG_RUNTIME_DIR"
modes=${REALAPPS_MODES:-auto guard shadow scan copy}
signal_modes=${REALAPPS_SIGNAL_MODES-auto guard shadow}
apps=${REALAPPS_APPS:-vkcube gfxrecon mpv-gpu-next mpv-gpu ffmpeg-scale ffmpeg-libplacebo vkcube-layers vkd3d-gears glmark2-zink chromium-webgl vkcube-gfxrecon vkcube-renderdoc gst-vulkan}
for f in /usr/share/vulkan/implicit_layer.d/MangoHud.json /usr/share/vulkan/implicit_layer.d/vkBasalt.json; do
  [ -e $f ] || { echo "FAIL: $f is not installed (scripts/deps.sh installs mangohud and vkbasalt)" >&2; exit 1; }
done
printf 'effects = cas\ncasSharpness = 0.4\n' >"$TMP/vkbasalt.conf"
DEV=$(vulkaninfo 2>/dev/null | sed -n 's/^[[:space:]]*deviceName *= *//p' | grep -m1 llvmpipe || true)
[ -n "$DEV" ] || { echo "FAIL: no lavapipe (llvmpipe) device" >&2; exit 1; }
failures=0
bad() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

# The application's command for $1, writing its output under $2.
app_cmd() {
  local out=$2
  case $1 in
    vkcube) echo xvfb-run -a -s "\"-screen 0 640x480x24\"" vkcube --c 300 ;;
    vkcube-layers) echo env MANGOHUD=1 ENABLE_VKBASALT=1 VKBASALT_CONFIG_FILE="$TMP/vkbasalt.conf" \
                VK_LOADER_LAYERS_ENABLE="*khronos_validation" \
                xvfb-run -a -s "\"-screen 0 640x480x24\"" vkcube --c 60 ;;
    vkd3d-gears) echo xvfb-run -a -s "\"-screen 0 640x480x24\"" timeout -s TERM 4 vkd3d-gears ;;
    gfxrecon) echo xvfb-run -a -s "\"-screen 0 320x320x24\"" gfxrecon-replay --wsi xlib \
                --screenshots 5,10,15,20 --screenshot-dir "$out" "$HERE/vkcube-20frames.gfxr" ;;
    mpv-*) echo env SHOT_DIR="$out" xvfb-run -a -s "\"-screen 0 1280x720x24\"" mpv --no-config \
                --vo=${1#mpv-} --gpu-api=vulkan --gpu-context=x11vk "--vulkan-device=\"$DEV\"" --hwdec=no \
                --start=0.5 --pause --script="$HERE/mpv-shots.lua" --no-audio --really-quiet "$TMP/video.mp4" ;;
    ffmpeg-scale) echo ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 -filter_hw_device vk \
                -i "$TMP/video.mp4" -frames:v 30 \
                -vf "format=yuv420p,hwupload,scale_vulkan=w=640:h=360,hwdownload,format=yuv420p" \
                -f framemd5 "$out/frames.md5" ;;
    ffmpeg-libplacebo) echo ffmpeg -hide_banner -loglevel error -init_hw_device vulkan=vk:0 -filter_hw_device vk \
                -i "$TMP/video.mp4" -frames:v 30 \
                -vf "format=yuv420p,hwupload,libplacebo=w=640:h=360:format=yuv420p,hwdownload,format=yuv420p" \
                -f framemd5 "$out/frames.md5" ;;
    # zink takes lavapipe only when software rendering is asked for.
    glmark2-zink) echo env LIBGL_ALWAYS_SOFTWARE=1 MESA_LOADER_DRIVER_OVERRIDE=zink \
                xvfb-run -a -s "\"-screen 0 640x480x24\"" "$HERE/glmark2-validate.sh" "$out" ;;
    chromium-webgl) echo "$HERE/chromium-webgl.sh" "$out" ;;
    vkcube-gfxrecon) echo "$HERE/vkcube-gfxrecon.sh" "$out" ;;
    vkcube-renderdoc) echo "$HERE/vkcube-renderdoc.sh" "$out" "$BUILD/lib" ;;
    gst-vulkan) echo "$HERE/gst-vulkan.sh" "$out" ;;
  esac
}

ffmpeg -hide_banner -loglevel error -f lavfi -i testsrc2=duration=3:size=1280x720:rate=30 \
  -c:v libx264 -pix_fmt yuv420p -g 30 "$TMP/video.mp4"

# Whether the application $1 leaves output to compare with a run without
# the layer (screenshots, frame hashes).
has_output() { case $1 in vkcube|vkcube-layers|vkd3d-gears) return 1 ;; esac; return 0; }

# Every application runs in a directory of its own ($TMP/wd), so that a
# crash leaves its core there. The cores tell lavapipe's own crash
# (lavapipe-crash.sh: a NULL dereference inside libvulkan_lvp.so, which mpv's
# gpu-next meets in about 1 run in 130 with nothing of memtrack loaded) from
# anything else: a run that died of that is run again, up to twice, and said,
# with or without the layer. Any other crash fails. Where the system pipes
# cores elsewhere (core_pattern "|..."), no core is seen: a recorded run is
# then judged by the layer's report of the fault, a run without the layer
# fails.
ulimit -c unlimited 2>/dev/null || true
case $(cat /proc/sys/kernel/core_pattern 2>/dev/null) in
  "|"*) echo "note: cores go to a program (core_pattern), so lavapipe's own crashes cannot be told apart" >&2 ;;
esac
WD=$TMP/wd
fresh_wd() { rm -rf "$WD" && mkdir "$WD"; }
# Whether the last run's core is lavapipe's own crash; CRASH says what any
# core it left says (empty without one). The cores are removed either way.
# Without a core, a recorded run's log ($1) may hold the layer's own report
# of the fault (mt_track_set_fault_report), which tells the same.
lavapipe_crashed() {
  local c rc=1 line
  CRASH=
  for c in "$WD"/core*; do
    [ -f "$c" ] && [ $rc -ne 0 ] || continue
    CRASH=$("$HERE/lavapipe-crash.sh" "$c") && rc=0
  done
  rm -f "$WD"/core*
  if [ -z "$CRASH" ] && [ -n "${1:-}" ] && line=$(grep -m1 "^memtrack: the process dies of " "$1"); then
    CRASH=${line#memtrack: }
    grep -Eq "^memtrack: the process dies of SIGSEGV \(address not mapped\) at address 0x[0-9a-f]{1,3}, outside any memory memtrack tracks; instruction at 0x[0-9a-f]+ in libvulkan_lvp\.so\+0x" <<<"$line" &&
      rc=0 CRASH="lavapipe's own NULL dereference: $CRASH"
  fi
  return $rc
}

# The application $1 without the layer, its output under $2.
run_ref() {
  local try rc
  for try in 1 2 3; do
    rm -rf "$2" && mkdir -p "$2" && fresh_wd
    set +e
    (cd "$WD" && eval "$(app_cmd $1 "$2")") >"$TMP/ref.log" 2>&1
    rc=$?
    set -e
    [ $rc -eq 0 ] && return 0
    lavapipe_crashed && [ $try -lt 3 ] || break
    echo "note: $1 without the layer died with exit $rc, $CRASH: running it again" >&2
  done
  cat "$TMP/ref.log"
  [ -z "$CRASH" ] || echo "$CRASH"
  return 1
}

for app in $apps; do
  ref=$TMP/$app-ref
  mkdir -p "$ref"
  # The application's own output without the layer (twice: it must be
  # deterministic for the comparison to mean anything).
  if has_output $app; then
    run_ref $app "$ref" || { bad "$app without the layer failed"; continue; }
    run_ref $app "$ref.2" || { bad "$app without the layer failed (second run)"; continue; }
    diff -r "$ref" "$ref.2" >/dev/null || { bad "$app: its own output is not deterministic"; continue; }
  fi
  line="$app:"
  runs=
  for m in $modes; do runs="$runs $m:auto"; done
  for m in $signal_modes; do runs="$runs $m:signal"; done
  for run in $runs; do
    mode=${run%:*} backend=${run#*:}
    tag=$mode
    [ $backend = auto ] || tag=$mode-$backend
    out=$TMP/$app-$tag
    mkdir -p "$out"
    failures_before=$failures
    trace=$out.mtrace
    # xvfb-run itself fails now and then to remove its temporary directory
    # after the application ended (its exit 5 hides the application's
    # status; seen once in the CI, vkd3d-gears): only then, or after
    # lavapipe's own crash (above), run again, said.
    want=0
    [ $app = vkd3d-gears ] && want=124 # it ends by the SIGTERM of its timeout
    for try in 1 2 3; do
      fresh_wd
      set +e
      (cd "$WD" && eval "\"$MEMTRACK\" record --quiet -o \"$trace\" --mode $mode --backend $backend --verify -- $(app_cmd $app "$out")") >"$out.log" 2>&1
      rc=$?
      set -e
      CRASH=
      if [ $rc -ne $want ] && lavapipe_crashed "$out.log" && [ $try -lt 3 ]; then
        echo "note: $app ($tag): the application died with exit $rc, $CRASH: running it again" >&2
      elif grep -q "^xvfb-run: error: problem while cleaning up temporary directory" "$out.log" && [ $try -lt 3 ]; then
        echo "note: $app ($tag): xvfb-run could not clean up its temporary directory: running it again" >&2
      else
        break
      fi
      rm -rf "$out" "$trace" && mkdir -p "$out"
    done
    rm -f "$WD"/core*
    [ $rc -eq $want ] || { bad "$app ($tag): record exited $rc${CRASH:+ ($CRASH)}"; tail -5 "$out.log" >&2; line="$line $tag=FAIL"; continue; }
    if has_output $app && ! diff -r "$ref" "$out" >/dev/null; then
      bad "$app ($tag): output differs from the run without the layer"
      diff -r "$ref" "$out" 2>&1 | head -3 >&2
    fi
    set +e
    "$MEMTRACK" verify "$trace" >"$out.verify" 2>&1
    v=$?
    set -e
    # Chromium's browser ends its GPU process with SIGTERM at shutdown now
    # and then (seen once in the CI): the emergency flush leaves an exact
    # trace that ended without a normal close, verify's 3 (docs/layer.md,
    # "A trace that survives any exit"), said. Every hash must still match.
    if [ $v -eq 3 ] && [ $app = chromium-webgl ] && grep -q "^hashes .* 0 mismatched" "$out.verify"; then
      echo "note: $app ($tag): its GPU process was ended before a normal close (verify 3: exact, incomplete)" >&2
      v=0
    fi
    if [ $v -ne 0 ]; then bad "$app ($tag): verify exited $v"; grep -E "MISMATCH|LOST|result" "$out.verify" | head -5 >&2; fi
    grep -q "^hashes *[1-9][0-9]* checked" "$out.verify" || bad "$app ($tag): the trace holds no checked submit"
    # The signal pass must have run on the signal backend alone.
    if [ $backend = signal ] && "$MEMTRACK" info "$trace" | grep "^track_backends" | grep -q uffd; then
      bad "$app ($tag): the trace says uffd tracked memory: $("$MEMTRACK" info "$trace" | grep "^track_backends")"
    fi
    line="$line $tag=ok"
    # A run that passed leaves its log only: its trace and output take tens
    # of MB, a whole pass gigabytes, on a disk other tests share.
    [ $failures -ne $failures_before ] || rm -rf "$out" "$trace" "$out.verify"
  done
  echo "$line"
done
[ $failures -eq 0 ] || { echo "realapps: $failures failures" >&2; exit 1; }
echo "realapps: ok"
