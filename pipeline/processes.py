"""Child processes that do not outlive their parent: Linux's ``PR_SET_PDEATHSIG`` (the launcher's phases, curate's
worker fork server and its workers). Elsewhere a no-op: the parents' own stop covers every normal end there."""

from __future__ import annotations

import ctypes
import os
import signal

PR_SET_PDEATHSIG = 1  # linux/prctl.h


def die_with_parent(signum: int = signal.SIGTERM) -> None:
    """Have the kernel send ``signum`` to this process when its parent dies, and send it now if the parent died
    before this call (the process was already handed to init)."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signum)
    except (OSError, AttributeError):
        return
    if os.getppid() == 1:
        os.kill(os.getpid(), signum)
