#!/usr/bin/env bash
# `cmake --install` (what `make install PREFIX=...` runs) puts the man pages
# (section 1: the CLI, section 3: the library) and the bash completion in
# the prefix; man renders every page without a warning; the installed
# completion loads and completes commands.
set -euo pipefail
build=$(cd "$1" && pwd) src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mandir=$tmp/prefix/share/man
for p in "$src"/man/man1/*.1 "$src"/man/man3/*.3; do
  sec=$(basename "$(dirname "$p")")
  [ -f "$mandir/$sec/$(basename "$p")" ] || fail "$sec/$(basename "$p") is not installed"
done
n=0
for p in "$mandir"/man1/*.1 "$mandir"/man3/*.3; do
  n=$((n + 1))
  # groff's own check (-ww: every warning), then man as a user runs it.
  out=$(groff -ww -z -man "$p" 2>&1) || fail "groff failed on $p: $out"
  [ -z "$out" ] || fail "groff warns on $(basename "$p"): $out"
  if command -v man >/dev/null; then
    out=$(MANWIDTH=80 man --warnings -l "$p" 2>&1 >/dev/null) || fail "man -l failed on $p: $out"
    [ -z "$out" ] || fail "man warns on $(basename "$p"): $out"
  fi
done
[ $n -ge 16 ] || fail "only $n man pages installed"
# Found by name through the prefix's manpath.
if command -v man >/dev/null; then
  MANWIDTH=80 man -M "$mandir" memtrack-report 2>/dev/null | grep -q "memtrack-report" || fail "man -M PREFIX memtrack-report"
  MANWIDTH=80 man -M "$mandir" 3 libmemtrack 2>/dev/null | grep -q "libmemtrack" || fail "man -M PREFIX 3 libmemtrack"
fi
comp=$tmp/prefix/share/bash-completion/completions/memtrack
[ -f "$comp" ] || fail "the bash completion is not installed"
out=$(bash -c 'source "$1"; COMP_WORDS=(memtrack re); COMP_CWORD=1; _memtrack; echo "${COMPREPLY[*]}"' _ "$comp")
[ "$out" = "record report" ] || fail "completing 'memtrack re' gave '$out'"
out=$(bash -c 'source "$1"; COMP_WORDS=(memtrack record --mode s); COMP_CWORD=3; _memtrack; echo "${COMPREPLY[*]}"' _ "$comp")
[ "$out" = "shadow scan" ] || fail "completing 'memtrack record --mode s' gave '$out'"
echo "install (man pages, completion): ok ($n pages)"
