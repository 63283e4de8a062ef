#!/usr/bin/env bash
# Runs the cluster tier's end-to-end tests ROUNDS times each and reports every failure: which
# tests failed, in which rounds, and where each round's log is.
#
#   bash tools/stress_cluster_tests.sh [ROUNDS] [PYTEST ARGS...]     (ROUNDS default 20)
#
# Without PYTEST ARGS it runs the tests marked `cluster` under tests/end_to_end and
# tests/training (clusters of real processes, the whole job signalled); PYTEST ARGS select
# others instead (e.g. tests/end_to_end/test_cluster_training.py -k sync). JOBS=2 runs two
# rounds at once: the load that makes races show. Faulthandler is on in every process
# (PYTHONFAULTHANDLER=1), so a task that crashes leaves its threads' stacks in the round's
# log. Logs go to LOG_DIR (default: a new directory under /tmp). PYTHON: the interpreter
# (default .venv/bin/python). Exit code 1 when a test failed, 0 otherwise.
set -euo pipefail
cd "$(dirname "$0")/.."

rounds=${1:-20}
shift || true
if ! [[ "$rounds" =~ ^[1-9][0-9]*$ ]]; then
    echo "stress_cluster_tests.sh: error: ROUNDS must be a positive integer, got '$rounds'" >&2
    exit 2
fi
selection=("$@")
if [ ${#selection[@]} -eq 0 ]; then
    selection=(-m cluster tests/end_to_end tests/training)
fi
PYTHON=${PYTHON:-.venv/bin/python}
JOBS=${JOBS:-1}
LOG_DIR=${LOG_DIR:-$(mktemp -d /tmp/stress-cluster-tests-XXXXXX)}
mkdir -p "$LOG_DIR"
export PYTHONFAULTHANDLER=1

round() {
    "$PYTHON" -m pytest -p no:cacheprovider -q -rfE "${selection[@]}" \
        >"$LOG_DIR/round-$1.log" 2>&1 || echo "$1 $?" >>"$LOG_DIR/failed-rounds"
}

echo "stress_cluster_tests.sh: $rounds rounds of: ${selection[*]} ($JOBS at once; logs in $LOG_DIR)"
started=$SECONDS
for ((i = 1; i <= rounds; i++)); do
    while [ "$(jobs -rp | wc -l)" -ge "$JOBS" ]; do wait -n || true; done
    round "$i" &
done
wait

# pytest's -rfE lines: 'FAILED path::test[id] - why' and 'ERROR path::test - why'.
summary=$( { grep -Ho -E '^(FAILED|ERROR) [^ ]+' "$LOG_DIR"/round-*.log || true; } |
          sed -E 's#^.*/round-([0-9]+)\.log:(FAILED|ERROR) #\1 #' |
          awk '{rounds[$2] = rounds[$2] (rounds[$2] ? ", " : "") $1; count[$2]++}
               END {for (test in count) printf "%3d of '"$rounds"': %s (rounds %s)\n",
                                               count[test], test, rounds[test]}' | sort -rn)
passed=$( { grep -h -o -E '[0-9]+ passed' "$LOG_DIR"/round-*.log || true; } | awk '{n += $1} END {print n + 0}')
minutes=$(( (SECONDS - started) / 60 ))
if [ ! -s "$LOG_DIR/failed-rounds" ]; then
    echo "stress_cluster_tests.sh: all $rounds rounds passed ($passed test runs, $minutes min)"
    exit 0
fi
echo "stress_cluster_tests.sh: $(wc -l <"$LOG_DIR/failed-rounds") of $rounds rounds failed" \
     "($passed test runs passed, $minutes min):"
if [ -n "$summary" ]; then
    echo "$summary"
else  # No test failed: pytest itself did (collection, no test selected).
    echo "    pytest exit codes (round code): $(tr '\n' ' ' <"$LOG_DIR/failed-rounds")"
fi
exit 1
