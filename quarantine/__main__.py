"""``python -m quarantine`` is the ``quarantine`` command."""

import sys

from quarantine.cli import main

sys.exit(main())
