#!/usr/bin/env bash
# `make test` RUNS times with both cores also loaded by busy loops at nice
# 19, as on a busy machine; appends each run's result to LOG and exits
# non-zero if any run failed. Usage: scripts/test-stress.sh RUNS LOG
set -uo pipefail
cd "$(dirname "$0")/.."
runs=${1:-5}
log=${2:-test-stress.log}
loops=()
suite=
stop() {
    # The suite (make and the tests under it) and the busy loops.
    [ -n "$suite" ] && kill -- -"$suite" 2>/dev/null
    for pid in "${loops[@]}"; do kill "$pid" 2>/dev/null; done
    wait 2>/dev/null
}
trap stop EXIT
# A signal ends the script (the EXIT trap then stops everything); a trap
# that only stopped the loops left the next run starting.
trap 'exit 130' INT
trap 'exit 143' TERM
set -m  # the suite runs in a process group of its own, killed whole
for _ in $(seq "$(nproc)"); do
    nice -n 19 bash -c 'while :; do :; done' &
    loops+=($!)
done
failed=0
for i in $(seq "$runs"); do
    start=$(date +%s)
    out=$(mktemp)
    make --no-print-directory test >"$out" 2>&1 &
    suite=$!
    if wait "$suite"; then
        verdict=passed
    else
        verdict=FAILED
        failed=$((failed + 1))
    fi
    suite=
    took=$(( $(date +%s) - start ))
    summary=$(grep -E "^(FAILED|ERROR) |test result: FAILED|[0-9]+ (passed|failed)" "$out" | grep -vE "test result: ok" | tail -n 20)
    printf 'run %d/%d: %s in %d s\n%s\n' "$i" "$runs" "$verdict" "$took" "$summary" | tee -a "$log"
    if [ "$verdict" = FAILED ]; then
        cp "$out" "$log.run$i"
        echo "  full output: $log.run$i" | tee -a "$log"
    fi
    rm -f "$out"
done
echo "$((runs - failed)) passed, $failed failed" | tee -a "$log"
[ "$failed" -eq 0 ]
