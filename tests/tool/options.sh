#!/usr/bin/env bash
# Everything the CLI accepts is documented: each command `memtrack --help`
# lists has a man page, a `memtrack help` page and a completion; each option
# its usage (`memtrack CMD --help`) lists is in its man page and completed;
# each mode, backend, compression preset and bench suite is completed and in
# the man page; each MEMTRACK_* variable of the layer is in memtrack-record(1);
# each public function of a header is in that module's man page (section 3).
# Adding an option, a command or a function without documenting it fails here.
set -euo pipefail
BUILD=$(cd "$1" && pwd) SRC=$(cd "$2" && pwd)
MEMTRACK=$BUILD/bin/memtrack MAN=$SRC/man
errors=0
fail() { echo "FAIL: $*" >&2; errors=$((errors + 1)); }
# troff source as plain words: "\-" is a hyphen, font escapes go.
# (Matched with grep on a here-string, not a pipe: grep -q would close it
# early and pipefail would count that.)
page() { sed -e 's/\\-/-/g' -e 's/\\f[BIRP]//g' "$1"; }
has() { grep -qE -- "$2" <<<"$1"; } # has TEXT REGEX
source "$SRC/tools/memtrack/completion.bash"
complete_words() { # complete_words WORD...: what completing after them offers
  COMP_WORDS=(memtrack "$@"); COMP_CWORD=$(($# )); COMPREPLY=()
  _memtrack
  printf '%s\n' "${COMPREPLY[@]}"
}

commands=$("$MEMTRACK" --help | awk '/^commands:/ { on = 1; next } on && !NF { exit } on { print $1 }')
[ -n "$commands" ] || fail "memtrack --help lists no commands"
top=$(complete_words "")
for c in $commands; do
  grep -qx -- "$c" <<<"$top" || fail "command $c is not completed"
  [ "$c" = help ] && continue
  f=$MAN/man1/memtrack-$c.1
  [ -f "$f" ] || { fail "command $c has no man page man1/memtrack-$c.1"; continue; }
  has "$(page "$MAN/man1/memtrack.1")" "memtrack-$c" || fail "memtrack(1) does not list $c"
  has "$("$MEMTRACK" help "$c")" "memtrack-$c" || fail "memtrack help $c does not print its page"
  text=$(page "$f")
  offered=$(complete_words "$c" -)
  # Options: those of the synopsis lines ("usage: memtrack CMD ...") and
  # the first word of each option line ("  --json   ...") of the usage.
  opts=$("$MEMTRACK" "$c" --help | awk '/^(usage:|       memtrack )/ { print; next } /^  +-/ { print $1 }' |
         grep -oE '(^|[][ (|])--?[a-z][a-z0-9-]*' | sed 's/^[][ (|]//' | sort -u)
  [ -n "$opts" ] || [ "$c" = check ] || fail "$c: no option found in its usage"
  for o in $opts; do
    has "$text" "(^|[^a-z0-9-])$o([^a-z0-9-]|\$)" || fail "$c: option $o is not in memtrack-$c.1"
    grep -qx -- "$o" <<<"$offered" || fail "$c: option $o is not completed"
  done
done
# Option values.
check_values() { # check_values CMD OPTION VALUE...
  local c=$1 o=$2; shift 2
  local offered; offered=$(complete_words "$c" "$o" "")
  for v in "$@"; do
    grep -qx -- "$v" <<<"$offered" || fail "$c $o: $v is not completed"
    has "$(page "$MAN/man1/memtrack-$c.1")" "\\b$v\\b" || fail "$c $o: $v is not in memtrack-$c.1"
  done
}
check_values record --mode auto guard shadow scan copy
check_values record --backend auto signal uffd
check_values record --compression default fast none
suites=$("$MEMTRACK" bench --list | cut -f1)
offered=$(complete_words bench "")
for s in $suites all; do
  grep -qx -- "$s" <<<"$offered" || fail "bench suite $s is not completed"
  has "$(page "$MAN/man1/memtrack-bench.1")" "\\b$s\\b" || fail "bench suite $s is not in memtrack-bench.1"
done
# The layer's variables (layer/config.h lists every one it parses).
for v in $(grep -oE 'MEMTRACK_[A-Z_]+' "$SRC/layer/config.h" | sort -u); do
  has "$(page "$MAN/man1/memtrack-record.1")" "\\b$v\\b" || fail "$v is not in memtrack-record.1"
done
# Public functions, by header.
for h in "$SRC"/include/memtrack/*.h; do
  m=$(basename "$h" .h)
  case $m in memtrack) continue ;; base) f=$MAN/man3/libmemtrack.3 ;; device_sim) f=$MAN/man3/memtrack-device.3 ;;
    *) f=$MAN/man3/memtrack-$m.3 ;; esac
  [ -f "$f" ] || { fail "include/memtrack/$m.h has no man page $(basename "$f")"; continue; }
  text=$(page "$f")
  for fn in $(grep -oE 'MT_API[^(]*\bmt_[a-z0-9_]+\(' "$h" | grep -oE 'mt_[a-z0-9_]+\($' | tr -d '('); do
    has "$text" "\\b$fn\\b" || fail "$fn ($m.h) is not in $(basename "$f")"
  done
done
# Every page names the version it documents (the project's one version).
ver=$("$MEMTRACK" --version | awk '{ print $2 }')
for p in "$MAN"/man1/*.1 "$MAN"/man3/*.3; do
  head -1 "$p" | grep -qF "\"memtrack $ver\"" || fail "$(basename "$p"): .TH does not say memtrack $ver"
done
[ $errors -eq 0 ] || { echo "$errors undocumented items" >&2; exit 1; }
echo "options: ok"
