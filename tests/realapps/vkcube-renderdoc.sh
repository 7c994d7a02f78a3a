#!/bin/sh
# vkcube captured by RenderDoc, for realapps.sh: RenderDoc's capture layer
# (implicit, enabled by ENABLE_VULKAN_RENDERDOC_CAPTURE, so above memtrack's
# explicit one: the order a user gets running RenderDoc inside `memtrack
# record`) maps memory through memtrack and, while it captures a frame,
# reads the mappings the application writes to record their contents and
# maps memory of its own to read back. Frame 30 is captured by number
# (renderdoc-trigger.c, preloaded after memtrack's own preload, built as
# $2/mt_renderdoc_trigger.so). Into $1/: the capture's thumbnail (the
# frame the device drew) and a hash of each data blob the capture holds
# (buffer and image contents, among them the uniform buffer vkcube writes
# through its mapping every frame), which two runs without memtrack give
# identically; the capture itself and the log beside that folder.
set -e
out=$1 trigger=$2/mt_renderdoc_trigger.so
[ -f "$trigger" ] || { echo "vkcube-renderdoc: $trigger is missing" >&2; exit 1; }
ENABLE_VULKAN_RENDERDOC_CAPTURE=1 MT_RD_FRAME=30 MT_RD_CAPTURE="$out.cap" \
  xvfb-run -a -s "-screen 0 640x480x24" env LD_PRELOAD="${LD_PRELOAD:+$LD_PRELOAD:}$trigger" vkcube --c 60
cap=$out.cap_frame30.rdc
[ -f "$cap" ] || { echo "vkcube-renderdoc: RenderDoc left no capture of frame 30" >&2; exit 1; }
# RenderDoc's tools run without memtrack's layer and interposer.
rd() { env -u VK_INSTANCE_LAYERS -u LD_PRELOAD renderdoccmd "$@" >>"$out.log" 2>&1; }
rd thumb -o "$out/thumb.png" "$cap"
# The capture as XML and a zip of its blobs: only the blobs are compared
# (the XML holds timestamps, thread ids and handles).
rd convert -f "$cap" -o "$out.zip.xml" -c zip.xml
mkdir "$out.blobs"
(cd "$out.blobs" && unzip -q "$out.zip" && md5sum * | sort -k2) >"$out/blobs.md5"
[ -s "$out/blobs.md5" ] || { echo "vkcube-renderdoc: the capture holds no data" >&2; exit 1; }
rm -rf "$out.blobs" "$out.zip" "$out.zip.xml"
