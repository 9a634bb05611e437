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
# Two sessions, each with every other file of that order: a worker's memory grows with each
# file it runs (TensorFlow keeps some traced graphs for the life of the process), and one
# session's three workers outgrew 24 GB (docs/notebook.md, "The suite's memory").
PARTS=2
CREATED=()  # the directories made here, removed at exit
trap 'rm -rf "${CREATED[@]}"' EXIT
if [ -z "${T2T_XLA_CACHE+set}" ]; then  # one XLA cache for both sessions (tests/conftest.py)
  T2T_XLA_CACHE=$(mktemp -d -t t2t_test_xla_cache_XXXXXX)
  export T2T_XLA_CACHE
  CREATED+=("$T2T_XLA_CACHE")
fi
if [ -z "${T2T_TEST_SHARED+set}" ]; then  # what both sessions share (tests/serve_process.py)
  T2T_TEST_SHARED=$(mktemp -d -t t2t_test_shared_XXXXXX)
  export T2T_TEST_SHARED
  CREATED+=("$T2T_TEST_SHARED")
fi
status=0
empty=0
for part in $(seq 1 $PARTS); do
  rc=0
  T2T_SUITE_PART="$part/$PARTS" python -m pytest -q -n 3 --dist loadfile \
    --no-loadscope-reorder tests "$@" || rc=$?
  if [ "$rc" = 5 ]; then    # no test selected in this part (e.g. -k matched the other one)
    empty=$((empty + 1))
  elif [ "$rc" != 0 ]; then
    status=$rc
  fi
done
if [ "$empty" = "$PARTS" ]; then
  status=5
fi
exit $status
