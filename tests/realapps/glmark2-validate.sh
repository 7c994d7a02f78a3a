#!/bin/sh
# glmark2's scenes with --validate, for realapps.sh: the per-scene validation
# lines (no frame rates with --validate) go to $1/validation.txt, the whole
# log beside that folder; glmark2's exit status is kept.
glmark2 --validate --off-screen >"$1.glmark2.log" 2>&1
rc=$?
grep 'Validation:' "$1.glmark2.log" >"$1/validation.txt"
exit $rc
