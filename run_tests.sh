#!/usr/bin/env bash
# Sets up a venv (pinned by requirements.lock) if needed, then runs the test suite.
#   ./run_tests.sh            # the default suite
#   ./run_tests.sh -k hparam  # extra arguments go to pytest
set -euo pipefail
cd "$(dirname "$0")"
source ./setup_venv.sh
export TF_CPP_MIN_LOG_LEVEL=3
python -m pytest -q tests "$@"
