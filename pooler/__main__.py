"""``python -m pooler`` is the same as the ``pooler`` command: both start at ``run``."""

import gc
import sys


def run() -> int:
    """The ``pooler`` command line as its process's own (``pooler.cli.main.main`` without arguments)."""
    # Before the command line's first import: main() says why the collector waits while pooler starts.
    gc.disable()
    from pooler.cli.main import main  # noqa: PLC0415

    return main()


if __name__ == "__main__":
    sys.exit(run())
