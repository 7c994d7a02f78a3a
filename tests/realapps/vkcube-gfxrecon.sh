#!/bin/sh
# vkcube captured by gfxreconstruct's capture layer, for realapps.sh: that
# layer sits below memtrack's (the order a user gets running it inside
# `memtrack record`) and hands up, for each mapping, a shadow it protects
# with mprotect and watches with a SIGSEGV handler of its own (its page
# guard). Its capture is then replayed without either layer: screenshots of
# frames 10, 30 and 59 go to $1/, the capture and the replay's log beside
# that folder. A write memtrack took for its own and never passed on would
# be missing from the capture and from what the device got.
set -e
VK_INSTANCE_LAYERS="${VK_INSTANCE_LAYERS:+$VK_INSTANCE_LAYERS:}VK_LAYER_LUNARG_gfxreconstruct" \
  GFXRECON_CAPTURE_FILE="$1.gfxr" GFXRECON_CAPTURE_FILE_TIMESTAMP=false GFXRECON_LOG_LEVEL=warning \
  xvfb-run -a -s "-screen 0 640x480x24" vkcube --c 60
env -u VK_INSTANCE_LAYERS -u LD_PRELOAD xvfb-run -a -s "-screen 0 640x480x24" \
  gfxrecon-replay --wsi xlib --screenshots 10,30,59 --screenshot-dir "$1" "$1.gfxr" >"$1.replay.log" 2>&1
