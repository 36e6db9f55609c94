"""`python -m convoy_lab.experiments` (see `cli`)."""

import signal
import sys

from .cli import main


def _interrupted(signum, frame):
    raise KeyboardInterrupt


# SIGTERM (from `timeout`, a supervisor, `kill`) ends a run as Ctrl-C does:
# the running emulator is stopped and the finished runs are kept.
signal.signal(signal.SIGTERM, _interrupted)
sys.exit(main())
