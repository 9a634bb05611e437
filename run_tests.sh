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
# One session: the three workers' memory peaked at 10.5 GB of the machine's 24
# (docs/notebook.md, "The suite's memory").
CREATED=()  # the directories made here, removed at exit
trap 'rm -rf "${CREATED[@]}"' EXIT
if [ -z "${T2T_XLA_CACHE+set}" ]; then  # one XLA cache for the binaries the tests start
  T2T_XLA_CACHE=$(mktemp -d -t t2t_test_xla_cache_XXXXXX)
  export T2T_XLA_CACHE
  CREATED+=("$T2T_XLA_CACHE")
fi
if [ -z "${T2T_TEST_SHARED+set}" ]; then  # what the workers share (tests/serve_process.py)
  T2T_TEST_SHARED=$(mktemp -d -t t2t_test_shared_XXXXXX)
  export T2T_TEST_SHARED
  CREATED+=("$T2T_TEST_SHARED")
fi
status=0
python -m pytest -q -n 3 --dist loadfile --no-loadscope-reorder tests "$@" || status=$?
exit $status
