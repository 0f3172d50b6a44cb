"""Entry point for ``python -m perflab``."""

import sys

from perflab.cli import main

sys.exit(main())
