"""``python -m calibview``: the same as the ``calibview`` command."""

import sys

from calibview.cli import main

sys.exit(main())
