#!/usr/bin/env bash
# Installs what memtrack needs to build, test and run its demo, using apt-get
# when running as root; otherwise prints the exact command and fails.
set -euo pipefail

packages=(
  cmake make gcc libc6-dev pkg-config   # build
  libzstd-dev libxxhash-dev             # trace compression and checksums
  libvulkan-dev vulkan-validationlayers # the Vulkan layer and its tests
  mesa-vulkan-drivers vulkan-tools      # lavapipe and vkcube for the demo
  xvfb xauth                            # a display for vkcube
  clang libclang-rt-14-dev              # libFuzzer targets (CI)
  mpv ffmpeg gfxreconstruct vkd3d-demos # the real-application tests (label realapps),
  mangohud vkbasalt                     # and other layers around ours there,
  glmark2-x11 libgl1-mesa-dri           # and OpenGL through zink
  valgrind                              # memtrack bench alloc --callgrind
  chromium groff-base man-db            # the report test (headless browser) and realapps; man pages
  gstreamer1.0-tools gstreamer1.0-plugins-bad # realapps: GStreamer's Vulkan elements
  gdb                                   # realapps: reads the cores of crashed runs
  renderdoc unzip                       # realapps: RenderDoc capturing a frame under ours
  piglit                                # realapps: piglit's OpenGL tests through zink
)

missing=()
for p in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [ "$status" = installed ] || missing+=("$p")
done

if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "memtrack: missing packages: ${missing[*]}" >&2
  echo "install them with:" >&2
  echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi

echo "memtrack: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${missing[@]}"
