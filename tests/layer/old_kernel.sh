#!/usr/bin/env bash
# The capture as users' machines run it: Debian 12's Linux 6.1 (and anything
# before 6.7) has no asynchronous userfaultfd write protection and no
# PAGEMAP_SCAN, so only the signal backend exists there. mt-old-kernel hides
# both from everything it runs (tests/old_kernel.c). Checked under it:
#   - track sees no uffd backend (mt_track_probe uffd says 0);
#   - the sample records and verifies in every mode with the default backend,
#     and a forced uffd backend falls back to the signal one, saying so;
#   - the hostile matrix passes with the signal backend (the uffd half is
#     skipped there, as on such a kernel), in the modes HOSTILE_MODES names.
. "$(dirname "$0")/common.sh"
OLD=$BUILD/bin/mt-old-kernel
[ -x "$OLD" ] || { echo "mt-old-kernel not built: skipped"; exit 77; }
"$OLD" true || { echo "seccomp filters unavailable here: skipped"; exit 77; }
[ "$("$OLD" "$BUILD/bin/mt_track_probe" uffd)" = 0 ] || fail "uffd still offered under the emulated old kernel"
run_app() { if [ -n "$PRELOAD" ]; then LD_PRELOAD=$PRELOAD "$@"; else "$@"; fi; }
for mode in auto guard shadow scan copy; do
  "$OLD" "$MEMTRACK" record --quiet --verify --mode "$mode" -o "$TMP/s.mtrace" -- "$SAMPLE" >"$TMP/rec.log" 2>&1 ||
    { cat "$TMP/rec.log" >&2; fail "sample, mode $mode: record failed"; }
  "$MEMTRACK" verify "$TMP/s.mtrace" >"$TMP/v.log" 2>&1 || { cat "$TMP/v.log" >&2; fail "sample, mode $mode: verify"; }
done
"$OLD" "$MEMTRACK" record --verify --backend uffd -o "$TMP/u.mtrace" -- "$SAMPLE" >"$TMP/rec.log" 2>&1 ||
  { cat "$TMP/rec.log" >&2; fail "sample, forced uffd: record failed"; }
grep -q "signal backend is used" "$TMP/rec.log" || { cat "$TMP/rec.log" >&2; fail "forced uffd: no word of the fallback"; }
"$MEMTRACK" verify "$TMP/u.mtrace" >/dev/null || fail "sample, forced uffd: verify"
echo "sample: every mode verifies; forced uffd falls back to signal, said"
"$OLD" env HOSTILE_BACKENDS="signal uffd" bash "$(dirname "$0")/hostile.sh" "$BUILD"
echo "old kernel: ok"
