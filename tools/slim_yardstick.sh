#!/usr/bin/env bash
# Runs tf-slim's own tests (bundled in the installed tf_slim package) with the
# `deployment` repairs applied, and prints pytest's summary line.
#
# Usage: PYTHON=/path/to/venv/bin/python tools/slim_yardstick.sh [pytest args]
# evaluation_test.py is left out: it needs the `nose` package.
set -euo pipefail

PYTHON="${PYTHON:-python}"
# `python -m` puts the working directory on sys.path, so `-p deployment` can
# import this repository's package.
cd "$(dirname "$0")/.."

slim_dir="$("${PYTHON}" -c 'import os, tf_slim; print(os.path.dirname(tf_slim.__file__))')"

"${PYTHON}" -m pytest -p deployment "${slim_dir}" \
    --ignore="${slim_dir}/evaluation_test.py" \
    -q -p no:cacheprovider "$@" | tail -n 1
