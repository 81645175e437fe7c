# lib.sh — helpers shared by the e2e shell tests (source it; it uses $fails).
#
# ok MSG / fail MSG: one line each; fail counts in $fails.
#
# check NAME WANT_RC CMD...: run CMD; WANT_RC "nz" means any non-zero exit
# with exactly one line on stderr, else the exact exit code. Counts failures
# in $fails.
check() {
    local name=$1 want=$2; shift 2
    local out rc
    out=$("$@" 2>&1 >/dev/null); rc=$?
    if [ "$want" = nz ] && [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | grep -c .)" -eq 1 ]; then
        echo "ok   $name: $out"
    elif [ "$want" != nz ] && [ $rc -eq "$want" ]; then
        echo "ok   $name"
    else
        echo "FAIL $name: rc=$rc, stderr: $out"; fails=$((fails + 1))
    fi
}

ok() { echo "ok   $*"; }
fail() { echo "FAIL $*"; fails=$((fails + 1)); }
