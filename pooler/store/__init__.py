"""The bundled reference store: ``pooler store serve``, a real HTTP server on SQLite.

It speaks the wire protocol of a Melbis store's ``tool_run`` and ``tool_list`` so that pools can
be run, and every test can talk to a real server, without a store of one's own. The parts:
``server`` (HTTP only), ``engine`` (registry, casting, grants, envelope, idempotency), ``db``,
``files`` (attachments), ``faults`` (injected failures), ``tools/`` (one module and one JSON
declaration per tool) and ``cli``.
"""
