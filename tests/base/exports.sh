#!/bin/sh
# Fails when the library exports a name that is neither public API nor
# internal-prefixed (docs/design.md, "Names"):
#   libmemtrack.a  every global symbol is a public mt_ function (declared
#                  MT_API in include/memtrack/*.h) or carries mti_;
#   libmemtrack.so exports exactly the public functions, no more, no less.
# usage: exports.sh INCLUDE_DIR LIBMEMTRACK.a LIBMEMTRACK.so
set -eu
inc=${1:?usage: exports.sh INCLUDE_DIR STATIC SHARED}
ar=${2:?}
so=${3:?}
command -v nm >/dev/null || exit 77
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0

# The public functions: the name before the first "(" of each MT_API line.
sed -n 's/^MT_API[^(]*[^a-z0-9_]\(mt_[a-z0-9_]*\)(.*/\1/p' "$inc"/memtrack/*.h | sort -u >"$tmp/public"
[ -s "$tmp/public" ] || { echo "no MT_API declarations under $inc" >&2; exit 1; }

# Sanitizer builds add their own globals (ASan's __odr_asan.NAME): not ours.
sanitizer='^__(odr_asan|asan|ubsan|tsan|sanitizer)'
nm -g --defined-only "$ar" | awk 'NF == 3 { print $3 }' | grep -Ev "$sanitizer" | sort -u >"$tmp/static"
grep -v '^mti_' "$tmp/static" | comm -23 - "$tmp/public" >"$tmp/bad_static" || true
if [ -s "$tmp/bad_static" ]; then
    echo "$ar: global symbols neither public (MT_API) nor mti_-prefixed:" >&2
    sed 's/^/    /' "$tmp/bad_static" >&2
    fail=1
fi

# Dynamic symbols; 'A' entries are the version script's node names.
nm -D --defined-only "$so" | awk 'NF == 3 && $2 != "A" { sub(/@.*/, "", $3); print $3 }' | grep -Ev "$sanitizer" | sort -u >"$tmp/dynamic"
comm -23 "$tmp/dynamic" "$tmp/public" >"$tmp/extra"
comm -13 "$tmp/dynamic" "$tmp/public" >"$tmp/missing"
if [ -s "$tmp/extra" ]; then
    echo "$so exports names that are not public API:" >&2
    sed 's/^/    /' "$tmp/extra" >&2
    fail=1
fi
if [ -s "$tmp/missing" ]; then
    echo "$so does not export these public functions:" >&2
    sed 's/^/    /' "$tmp/missing" >&2
    fail=1
fi
[ "$fail" -eq 0 ] && echo "$(wc -l <"$tmp/public") public functions; $(grep -c '^mti_' "$tmp/static" || true) internal (mti_) symbols"
exit "$fail"
