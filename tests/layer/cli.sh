#!/usr/bin/env bash
# CLI contract: help and version work; unknown commands and bad flags print
# usage to stderr and exit 2; bad files give a clear error and exit 1.
. "$(dirname "$0")/common.sh"
"$MEMTRACK" --help | grep -q "record" || fail "--help lists no record"
"$MEMTRACK" --version | grep -q "memtrack 0\." || fail "--version"
expect2() { set +e; "$@" >"$TMP/o" 2>"$TMP/e"; rc=$?; set -e; [ $rc -eq 2 ] || fail "'$*' exited $rc, not 2"; grep -q usage "$TMP/e" || fail "'$*' printed no usage on stderr"; }
expect2 "$MEMTRACK"
expect2 "$MEMTRACK" frobnicate
expect2 "$MEMTRACK" --frobnicate
expect2 "$MEMTRACK" bench
expect2 "$MEMTRACK" bench track --fast
expect2 "$MEMTRACK" record --mode warp -- true
expect2 "$MEMTRACK" record
expect2 "$MEMTRACK" info
expect2 "$MEMTRACK" verify
expect2 "$MEMTRACK" dump x.mtrace --submit 1
expect2 "$MEMTRACK" dump x.mtrace --submit one --memory 1 -o y
for c in record info verify dump bench; do "$MEMTRACK" $c --help | grep -q "usage: memtrack $c" || fail "$c --help"; done
head -c 3000 /dev/urandom >"$TMP/junk"
set +e
"$MEMTRACK" info "$TMP/junk" 2>"$TMP/e"; rc=$?
set -e
[ $rc -eq 1 ] && grep -q "memtrack: " "$TMP/e" || fail "info on junk: rc=$rc"
set +e; "$MEMTRACK" verify /nonexistent.mtrace 2>"$TMP/e"; rc=$?; set -e
[ $rc -eq 1 ] && grep -q "No such file" "$TMP/e" || fail "verify on a missing file: rc=$rc"
echo "cli: ok"
