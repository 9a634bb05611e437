#!/usr/bin/env bash
# Sets up a venv (pinned by requirements.lock) if needed, then runs the test suite.
#   ./run_tests.sh            # the default suite
#   ./run_tests.sh -k hparam  # extra arguments go to pytest (-n 0: one process)
set -euo pipefail
cd "$(dirname "$0")"
source ./setup_venv.sh
export TF_CPP_MIN_LOG_LEVEL=3
# Three pytest-xdist workers on a 2-core machine, each test file kept in one worker (its
# module fixtures built once): most tests use one core at a time and many wait on a child
# process or a server, so a third worker fills the idle time (docs/notebook.md, the suite's
# time). --no-loadscope-reorder: files go out in conftest's order (longest first).
python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder tests "$@"
