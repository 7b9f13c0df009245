#!/bin/bash
# critest v1.29.0, the whole validation suite (no focus, nothing skipped,
# one runner), against the anchor (containerd 1.6 + runc, containerd.sh):
# what the test images (tests/images/build.sh) are checked with, and the
# reference podscope's own critest results are read against. Runs inside
# the harness:
#
#   CRICTL=... CRITEST=... tests/harness/harness.sh run tests/harness/anchor/critest-containerd.sh
#
#   CRICTL, CRITEST   the tools (give them to harness.sh; default: the
#                     harness's copies, else ../shared/tools/)
#   CRITEST_LOG       keep critest's whole output there (default: a temp file,
#                     removed)
#
# Prints the Passed/Failed/Skipped counts, the failed specs' names and the
# wall time. Fails when critest could not run, or when a spec failed but
# the digest-pinned image's (its digest names a manifest on gcr.io that no
# offline registry can serve): containerd passes every other runnable one
# with the images tests/images/build.sh makes.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../../.." && pwd)
# The tools: as given (harness.sh names its copies inside when given
# CRICTL= and CRITEST=), else where the harness binds them, else the
# project's (../shared/tools).
tool() {
    local p
    for p in "/usr/local/lib/podscope-test/bin/$1" "$REPO/../shared/tools/$1"; do
        [[ -x $p ]] && { echo "$p"; return; }
    done
    echo "$REPO/../shared/tools/$1"
}
export CRICTL=${CRICTL:-$(tool crictl)}
CRITEST=${CRITEST:-$(tool critest)}
say() { echo "critest-containerd: $*" >&2; }
fail() {
    say "FAILED: $*"
    exit 1
}
[[ -x $CRITEST ]] || fail "$CRITEST is missing or not executable (set CRITEST=)"

LOG=${CRITEST_LOG:-$(mktemp /tmp/critest-containerd.XXXXXX)}
cleanup() {
    local rc=$?
    "$HERE/containerd.sh" stop || rc=1
    [[ -n ${CRITEST_LOG:-} ]] || rm -f "$LOG"
    exit "$rc"
}
"$HERE/containerd.sh" start
trap cleanup EXIT
eval "$("$HERE/containerd.sh" env)"

say "running the whole suite against $ANCHOR_ENDPOINT (log: $LOG)"
t0=$(date +%s.%N)
# critest exits non-zero when a spec fails; its summary says how many.
# One runner is its default (-parallel=1): given explicitly, ginkgo takes
# it for go test's own -parallel and refuses to run.
timeout 3600 "$CRITEST" --runtime-endpoint "$ANCHOR_ENDPOINT" --image-endpoint "$ANCHOR_ENDPOINT" \
    --ginkgo.no-color >"$LOG" 2>&1 || true
t1=$(date +%s.%N)

summary=$(grep -E '^(SUCCESS|FAIL)! -- [0-9]+ Passed \| [0-9]+ Failed' "$LOG" | tail -n1 || true)
[[ -n $summary ]] || { tail -n 40 "$LOG" >&2; fail "critest printed no summary"; }
ran=$(sed -n 's/^Ran \([0-9]*\) of \([0-9]*\) Specs.*/\1 of \2/p' "$LOG" | tail -n1)
read -r passed failed pending skipped < <(sed -E \
    's/^.* -- ([0-9]+) Passed \| ([0-9]+) Failed \| ([0-9]+) Pending \| ([0-9]+) Skipped.*/\1 \2 \3 \4/' <<<"$summary")
echo "critest v1.29.0 on containerd $(containerd --version | awk '{print $3}') + runc $(runc --version | head -n1 | awk '{print $3}'):"
echo "  ran $ran specs: $passed Passed, $failed Failed, $skipped Skipped, $pending Pending"
echo "  wall time: $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.0f s", b - a }')"
# Each failure is printed twice by ginkgo (as it happens and in the
# summary): the names once.
failed_names=$(sed -nE 's/^\s*\[FAIL\] (.*)$/\1/p' "$LOG" |
    sed -E 's/ \[(It|BeforeEach|AfterEach|JustBeforeEach)\] / /' | sort -u)
if ((failed > 0)); then
    echo "  failed:"
    sed 's/^/    /' <<<"$failed_names"
fi
digest=$(grep -c 'public image with digest should be pulled and removed' <<<"$failed_names" || true)
((failed == digest)) || fail "specs failed besides the digest-pinned image's (CRITEST_LOG=FILE keeps critest's output)"
