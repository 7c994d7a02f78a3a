#!/usr/bin/env bash
# Usage: lavapipe-crash.sh CORE
# Prints one line on where the crash in the core dump CORE happened, and
# exits 0 when it is lavapipe's own crash: SIGSEGV with SEGV_MAPERR at an
# address in the first page (a NULL pointer dereferenced) by an instruction
# of libvulkan_lvp.so. Exit 1 for any other crash, or when the core cannot
# be read.
#
# Why this exists: mpv's gpu-next on Debian 12's lavapipe (Mesa 22.3) dies
# now and then with nothing of memtrack loaded: 4 of 530 runs here, every
# one in a lavapipe queue thread writing through a NULL list pointer
# (libvulkan_lvp.so+0xd66fd, address 0x8). A recorded run that dies of that
# is taken for lavapipe's own: the same crash happens without memtrack, and
# the faults memtrack causes are write-protection faults (SEGV_ACCERR) on
# mapped pages, not NULL dereferences.
set -euo pipefail
core=$1
command -v gdb >/dev/null || exit 1
out=$(gdb -batch -nx -c "$core" -ex 'p $_siginfo.si_signo' -ex 'p $_siginfo.si_code' \
  -ex 'p/x $_siginfo._sifields._sigfault.si_addr' -ex 'p/x $pc' -ex 'info proc mappings' 2>/dev/null) || exit 1
val() { sed -n "s/^\\\$$1 = \\(.*\\)\$/\\1/p" <<<"$out" | sed 's/^(void \*) //'; }
signo=$(val 1) code=$(val 2) addr=$(val 3) pc=$(val 4)
[ -n "$pc" ] || exit 1
# The mapping that holds the faulting instruction: start end size offset path.
where=unknown
while read -r start end _ off path; do
  [[ $start == 0x* && -n ${path:-} ]] || continue
  if (( start <= pc && pc < end )); then
    where=$(printf '%s+0x%x' "${path##*/}" $((pc - start + off)))
    break
  fi
done <<<"$out"
desc="signal $signo (code ${code:-?}) at $where, address ${addr:-?}"
if [ "$signo" = 11 ] && [ "$code" = 1 ] && [ -n "$addr" ] && (( addr < 0x1000 )) &&
   [[ $where == libvulkan_lvp.so+* ]]; then
  echo "lavapipe's own NULL dereference: $desc"
  exit 0
fi
echo "$desc"
exit 1
