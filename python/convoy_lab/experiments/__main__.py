"""`python -m convoy_lab.experiments` (see `cli`)."""

import sys

from .cli import main

sys.exit(main())
