#!/bin/sh
# Fails when the files of one module of src/ call each other in a loop.
# usage: filecycles.sh OBJDIR  (the memtrack_obj objects: .../memtrack_obj.dir/src)
#
# An edge A -> B means A.o has an undefined symbol that B.o (same module)
# defines. Module = first folder under src/ (src/coherence/backends/ belongs
# to coherence). tsort(1) reports a loop; we print every loop it names.
set -eu
dir=${1:?usage: filecycles.sh OBJDIR}
command -v nm >/dev/null && command -v tsort >/dev/null || exit 77
[ -d "$dir" ] || { echo "no object directory $dir" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
nmods=0
for mod in "$dir"/*/; do
    mod=${mod%/}
    name=$(basename "$mod")
    find "$mod" -name '*.o' | sort >"$tmp/objs"
    [ -s "$tmp/objs" ] || continue
    nmods=$((nmods + 1))
    : >"$tmp/defs"
    : >"$tmp/undefs"
    while read -r o; do
        f=${o#"$mod"/}
        f=${f%.o}
        nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print $3, f }' >>"$tmp/defs"
        nm -u "$o" | awk -v f="$f" '{ print $NF, f }' >>"$tmp/undefs"
    done <"$tmp/objs"
    # Edges "user definer", self-edges dropped; every file also as a node.
    awk 'NR == FNR { def[$1] = $2; next }
         ($1 in def) && def[$1] != $2 { print $2, def[$1] }' \
        "$tmp/defs" "$tmp/undefs" | sort -u >"$tmp/edges"
    sed 's|.*/||; s|\.o$||' "$tmp/objs" >/dev/null
    if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/err"; then
        echo "src/$name: files call each other in a loop:" >&2
        sed -n 's/^tsort: //p' "$tmp/err" | grep -v 'input contains a loop' | sed 's/^/    /' >&2
        echo "  edges (caller -> callee, symbol) on the loop:" >&2
        loop=$(sed -n 's/^tsort: //p' "$tmp/err" | grep -v 'input contains a loop' | tr '\n' ' ')
        awk -v loop=" $loop" 'NR == FNR { def[$1] = $2; next }
             ($1 in def) && def[$1] != $2 && index(loop, " " $2 " ") && index(loop, " " def[$1] " ") {
                 print "    " $2 " -> " def[$1] "  (" $1 ")" }' "$tmp/defs" "$tmp/undefs" | sort >&2
        fail=1
    fi
done
[ "$nmods" -gt 0 ] || { echo "no objects under $dir" >&2; exit 1; }
[ "$fail" -eq 0 ] && echo "no file-level loops in $nmods modules"
exit "$fail"
