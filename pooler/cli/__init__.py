"""The ``pooler`` command line: parsing, wiring, rendering, exit statuses."""
