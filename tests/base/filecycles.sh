#!/bin/sh
# Fails when the files of one module of src/ call each other in a loop.
# usage: filecycles.sh OBJLIST [KNOWN_MODULE...]
#   OBJLIST: a file naming the library's objects, one a line
#   (.../memtrack_obj.dir/src/MODULE/FILE.c.o; CMake writes it)
#   KNOWN_MODULE: a module whose loops are reported but not (yet) an error;
#   tests/CMakeLists.txt says which and why. A listed module found clean is
#   an error too, so that the list only shrinks.
#
# An edge A -> B means A.o has an undefined symbol that B.o (same module)
# defines. Module = first folder under src/ (src/coherence/backends/ belongs
# to coherence). tsort(1) reports a loop; we print every loop it names.
set -eu
list=${1:?usage: filecycles.sh OBJLIST [KNOWN_MODULE...]}
shift
known=" $* "
command -v nm >/dev/null && command -v tsort >/dev/null || exit 77
[ -r "$list" ] || { echo "no object list $list" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
nmods=0
for name in $(sed -n 's|.*/src/\([^/]*\)/.*|\1|p' "$list" | sort -u); do
    grep "/src/$name/" "$list" | sort >"$tmp/objs"
    mod=${name}
    nmods=$((nmods + 1))
    : >"$tmp/defs"
    : >"$tmp/undefs"
    while read -r o; do
        f=${o##*/src/"$mod"/}
        f=${f%.o}
        nm -g --defined-only "$o" | awk -v f="$f" 'NF == 3 { print $3, f }' >>"$tmp/defs"
        nm -u "$o" | awk -v f="$f" '{ print $NF, f }' >>"$tmp/undefs"
    done <"$tmp/objs"
    # Edges "user definer", self-edges dropped; every file also as a node.
    awk 'NR == FNR { def[$1] = $2; next }
         ($1 in def) && def[$1] != $2 { print $2, def[$1] }' \
        "$tmp/defs" "$tmp/undefs" | sort -u >"$tmp/edges"
    if ! tsort "$tmp/edges" >/dev/null 2>"$tmp/err"; then
        loop=$(sed -n 's/^tsort: //p' "$tmp/err" | grep -v 'input contains a loop' | sort -u | tr '\n' ' ')
        case $known in
        *" $name "*) echo "src/$name (known, not yet an error): files on loops: $loop" >&2
                     continue ;;
        esac
        echo "src/$name: files call each other in a loop; files on loops: $loop" >&2
        echo "  edges (caller -> callee, symbol) among them:" >&2
        awk -v loop=" $loop" 'NR == FNR { def[$1] = $2; next }
             ($1 in def) && def[$1] != $2 && index(loop, " " $2 " ") && index(loop, " " def[$1] " ") {
                 print "    " $2 " -> " def[$1] "  (" $1 ")" }' "$tmp/defs" "$tmp/undefs" | sort >&2
        fail=1
    else
        case $known in
        *" $name "*) echo "src/$name is listed as known to loop but has no loop: drop it from the list" >&2
                     fail=1 ;;
        esac
    fi
done
[ "$nmods" -gt 0 ] || { echo "no objects in $list" >&2; exit 1; }
[ "$fail" -eq 0 ] && echo "no file-level loops in $nmods modules (known: ${*:-none})"
exit "$fail"
