#!/usr/bin/env bash
# GStreamer's Vulkan elements (gst-plugins-bad): a moving test pattern split
# by a tee into two branches with their own streaming threads (queues), each
# uploading the frames to Vulkan images through mapped staging memory
# (one converting them on the device) and reading them back: GStreamer's
# own allocator, buffer pools and threads. Writes each branch's frames to
# $1/a.raw and $1/b.raw. (Two independent sources in one pipeline give
# different frames from run to run without any layer.)
set -eu
VI='video/x-raw(memory:VulkanImage)'
exec gst-launch-1.0 -q \
  videotestsrc num-buffers=90 pattern=ball foreground-color=0xffff8020 background-color=0xff2040c0 ! video/x-raw,format=RGBA,width=320,height=240 ! tee name=t \
  t. ! queue ! vulkanupload ! vulkancolorconvert ! "$VI,format=BGRA" ! vulkandownload ! \
       video/x-raw,format=BGRA ! filesink location="$1/a.raw" \
  t. ! queue ! vulkanupload ! "$VI" ! vulkandownload ! filesink location="$1/b.raw"
