"""Child processes that end with the process that started them.

A parent killed with SIGKILL runs no handler: its children (a sweep's trial, datagen's
shard writers) would go on writing beside the parent's next run, or wait for work forever.
Each calls `stop_with_parent` first, so the kernel signals it when the parent dies.

    stop_with_parent(parent_pid)                  # SIGTERM when parent_pid dies (Linux)
"""

import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1  # prctl's option (linux/prctl.h)


def stop_with_parent(parent_pid, signum=signal.SIGTERM):
  """Linux: `signum` to this process when the process that started it (parent_pid) dies
  (prctl's PR_SET_PDEATHSIG), now if it is already gone. Elsewhere nothing."""
  if not sys.platform.startswith("linux"):
    return
  ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, int(signum))
  if os.getppid() != parent_pid:  # it died before the call above
    os.kill(os.getpid(), signum)
