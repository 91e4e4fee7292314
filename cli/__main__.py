"""``python -m rechunk.cli``: the ``rechunk`` command."""

import sys

from rechunk.cli import main

sys.exit(main())
