"""``python -m pooler`` is the same as the ``pooler`` command."""

import sys

from pooler.cli.main import main

sys.exit(main())
