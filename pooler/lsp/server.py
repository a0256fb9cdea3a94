"""The language server: pygls wired to the check, completion, hover and definition of this package.

Documents are checked on open, and again a moment after the last change (typing is not checked
keystroke by keystroke); when a file a pool reads changes (the client's file watcher, a save), every
open pool is checked again.  The check runs on a worker thread, so the server keeps answering.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lsprotocol import types as lsp
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from pooler.errors import PoolerError
from pooler.lsp.checking import Finding, Report, absolute, check_document
from pooler.lsp.registry import Declarations, Fetch, Registries, against_in
from pooler.lsp.spans import Span
from pooler.version import __version__

if TYPE_CHECKING:
    from pooler.pool.model import Pool

log = logging.getLogger("pooler.lsp")

#: Seconds after the last change before a document is checked again.
DEBOUNCE = 0.3
#: What the features run on (YAML, the schema, the pool's checks), imported on a worker thread once
#: initialize is answered, and by each feature where it is used: the answer does not wait for them.
LATER = ("pooler.pool.compiler", "pooler.lsp.complete", "pooler.lsp.navigate")
_KINDS = {
    "key": lsp.CompletionItemKind.Property, "field": lsp.CompletionItemKind.Field,
    "unit": lsp.CompletionItemKind.Module, "command": lsp.CompletionItemKind.Method,
    "step": lsp.CompletionItemKind.Reference, "var": lsp.CompletionItemKind.Variable,
    "column": lsp.CompletionItemKind.Field, "value": lsp.CompletionItemKind.EnumMember,
}


class PoolServer(LanguageServer):
    """The server's state: the registries, the last pool loaded of each document, its fixes."""

    def __init__(self, fetch: Fetch | None, against: str | None, debounce: float = DEBOUNCE) -> None:
        super().__init__("pooler", __version__, text_document_sync_kind=lsp.TextDocumentSyncKind.Full)
        self.registries = Registries(fetch)
        self.against = against
        self.debounce = debounce
        self.pools: dict[str, Pool | None] = {}
        self.fixes: dict[str, list[Finding]] = {}
        #: The other files each pool's last check published problems in.
        self.elsewhere: dict[str, set[str]] = {}
        #: The files each pool reads (``pool_source``, ``params_source``, data files).
        self.reads: dict[str, set[str]] = {}
        self.timers: dict[str, asyncio.TimerHandle] = {}
        self.told: set[str] = set()

    # What the checks are made against.
    def source_of(self, text: str, path: str) -> str | None:
        """The registry a document names for itself (a file or folder relative to the document's
        own folder), else the server's."""
        named = against_in(text)
        if named is None:
            return self.against
        beside = Path(path).parent / Path(named).expanduser()
        return str(beside) if "://" not in named and beside.exists() else named

    def declarations(self, text: str, path: str) -> tuple[list[dict[str, Any]] | None, str | None]:
        """The tools a document is checked against, and a message when its registry cannot be had."""
        source = self.source_of(text, path)
        got = self.registries.tools(source)
        if isinstance(got, PoolerError):
            return None, f"pooler lsp: the registry {source} cannot be read: {got.message}"
        return got, None

    # Checking and publishing.
    def is_pool(self, uri: str, text: str) -> bool:
        """A document checked as a pool: not a file another open pool reads, not a JSON list."""
        if text.lstrip().startswith("["):
            return False
        path = to_fs_path(uri) or ""
        return not any(path in read for other, read in self.reads.items() if other != uri)

    def schedule(self, uri: str, delay: float) -> None:
        loop = asyncio.get_running_loop()
        old = self.timers.pop(uri, None)
        if old is not None:
            old.cancel()
        self.timers[uri] = loop.call_later(delay, lambda: asyncio.ensure_future(self.check_now(uri)))

    async def check_now(self, uri: str) -> None:
        self.timers.pop(uri, None)
        try:
            doc = self.workspace.get_text_document(uri)
        except KeyError:
            return
        text, version, path = doc.source, doc.version, to_fs_path(uri)
        if path is None or not self.is_pool(uri, text):
            return
        loop = asyncio.get_running_loop()
        try:
            report, note = await loop.run_in_executor(self.thread_pool, self.check_text, path, text)
        except Exception as exc:  # a bug must not end the editor's server: it is logged and told
            log.exception("checking %s failed", path)
            self.window_log_message(lsp.LogMessageParams(
                lsp.MessageType.Error, f"pooler lsp: internal error while checking {path}: "
                                       f"{type(exc).__name__}: {exc}"))
            return
        if note and note not in self.told:
            self.told.add(note)
            self.window_show_message(lsp.ShowMessageParams(lsp.MessageType.Warning, note))
        if self.workspace.get_text_document(uri).version != version:
            return  # changed while it was checked: the check of the newer text is on its way
        self.publish(uri, report)

    def check_text(self, path: str, text: str) -> tuple[Report, str | None]:
        tools, note = self.declarations(text, path)
        return check_document(path, text, tools), note

    def publish(self, uri: str, report: Report) -> None:
        if report.pool is not None or self.pools.get(uri) is None:
            # A text that cannot be read keeps the last pool that could: completion, hover and
            # definition go on from it while the file is being typed.
            self.pools[uri] = report.pool
        own = to_fs_path(uri) or ""
        others = {path for path in report.files if path != own}
        for gone in self.elsewhere.get(uri, set()) - others:
            self.send(from_fs_path(gone) or gone, [])
        self.elsewhere[uri] = others
        self.reads[uri] = report.reads
        for path, findings in report.files.items():
            target = uri if path == own else (from_fs_path(path) or path)
            if target == uri:
                self.fixes[uri] = findings
            lines = self.lines_of(target)
            self.send(target, [self.diagnostic(f, lines) for f in findings])

    def send(self, uri: str, diagnostics: list[lsp.Diagnostic]) -> None:
        self.text_document_publish_diagnostics(lsp.PublishDiagnosticsParams(uri, diagnostics))

    def diagnostic(self, finding: Finding, lines: list[str]) -> lsp.Diagnostic:
        related = None
        if finding.told_in is not None:
            where, span = finding.told_in
            target = from_fs_path(where) or where
            related = [lsp.DiagnosticRelatedInformation(
                lsp.Location(target, self.to_client(self.lines_of(target), span)), finding.message)]
        return lsp.Diagnostic(self.to_client(lines, finding.span), finding.message,
                              severity=lsp.DiagnosticSeverity.Error, source="pooler check",
                              related_information=related)

    # Positions: the server counts characters, the client its own units (UTF-16 by default).
    def lines_of(self, uri: str) -> list[str]:
        """A document's lines: the editor's text where it holds the document, else the file's."""
        doc = self.workspace.text_documents.get(uri)
        if doc is not None:
            text: str = doc.source
            return text.splitlines()
        try:
            return Path(to_fs_path(uri) or "").read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return []

    def to_client(self, lines: list[str], span: Span) -> lsp.Range:
        codec = self.workspace.position_codec
        start = codec.position_to_client_units(lines, lsp.Position(span.line, span.char)) \
            if span.line < len(lines) else lsp.Position(span.line, span.char)
        end = codec.position_to_client_units(lines, lsp.Position(span.end_line, span.end_char)) \
            if span.end_line < len(lines) else lsp.Position(span.end_line, span.end_char)
        return lsp.Range(start, end)

    def cursor(self, uri: str, position: lsp.Position) -> tuple[list[str], int, int]:
        doc = self.workspace.get_text_document(uri)
        lines = doc.source.splitlines()
        at = doc.position_codec.position_from_client_units(doc.lines, position)
        return lines, at.line, at.character

    def decl_of(self, uri: str) -> Declarations:
        tools, _ = self.declarations(self.workspace.get_text_document(uri).source, to_fs_path(uri) or "")
        return Declarations(tools)


def build(fetch: Fetch | None = None, against: str | None = None, debounce: float = DEBOUNCE) -> PoolServer:
    """The server with every feature registered; ``fetch`` gets a registry's tools by its source."""
    server = PoolServer(fetch, against, debounce)

    @server.feature(lsp.INITIALIZE)
    def initialize(ls: PoolServer, params: lsp.InitializeParams) -> None:
        options = params.initialization_options
        if isinstance(options, dict) and isinstance(options.get("against"), str):
            ls.against = options["against"]

    @server.feature(lsp.INITIALIZED)
    def initialized(ls: PoolServer, _: lsp.InitializedParams) -> None:
        for module in LATER:
            ls.thread_pool.submit(importlib.import_module, module)
        watch = ls.client_capabilities.workspace and ls.client_capabilities.workspace.did_change_watched_files
        if watch and watch.dynamic_registration:
            ls.client_register_capability(lsp.RegistrationParams([lsp.Registration(
                "pooler-files", lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES,
                lsp.DidChangeWatchedFilesRegistrationOptions([lsp.FileSystemWatcher("**/*")]))]))

    @server.feature(lsp.TEXT_DOCUMENT_DID_OPEN)
    def did_open(ls: PoolServer, params: lsp.DidOpenTextDocumentParams) -> None:
        ls.pools.setdefault(params.text_document.uri, None)
        ls.schedule(params.text_document.uri, 0)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: PoolServer, params: lsp.DidChangeTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.pools.setdefault(uri, None)
        ls.schedule(uri, ls.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_SAVE)
    def did_save(ls: PoolServer, params: lsp.DidSaveTextDocumentParams) -> None:
        # The files a pool reads are read from disk: saved, the pools that read them see the change.
        saved = to_fs_path(params.text_document.uri) or ""
        for uri, read in ls.reads.items():
            if saved in read:
                ls.schedule(uri, ls.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: PoolServer, params: lsp.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        ls.pools.pop(uri, None)
        ls.fixes.pop(uri, None)
        ls.reads.pop(uri, None)
        for path in ls.elsewhere.pop(uri, set()):
            ls.send(from_fs_path(path) or path, [])
        ls.send(uri, [])

    @server.feature(lsp.WORKSPACE_DID_CHANGE_WATCHED_FILES)
    def watched(ls: PoolServer, params: lsp.DidChangeWatchedFilesParams) -> None:
        changed = {to_fs_path(change.uri) or "" for change in params.changes}
        for uri, read in ls.reads.items():
            if changed & read:
                ls.schedule(uri, ls.debounce)

    @server.feature(lsp.TEXT_DOCUMENT_COMPLETION,
                    lsp.CompletionOptions(trigger_characters=["@", ".", "{", ":", " ", '"']))
    def completion(ls: PoolServer, params: lsp.CompletionParams) -> lsp.CompletionList:
        from pooler.lsp.complete import complete  # noqa: PLC0415 - see LATER
        from pooler.lsp.context import spot_at  # noqa: PLC0415

        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        spot = spot_at(lines, line, char)
        if spot is None:
            return lsp.CompletionList(is_incomplete=False, items=[])
        uri = params.text_document.uri
        found = complete(spot, ls.pools.get(uri), ls.decl_of(uri), line)
        return lsp.CompletionList(is_incomplete=False, items=[
            lsp.CompletionItem(item.label, kind=_KINDS.get(item.kind), detail=item.detail or None,
                               documentation=lsp.MarkupContent(lsp.MarkupKind.Markdown, item.doc)
                               if item.doc else None)
            for item in found])

    @server.feature(lsp.TEXT_DOCUMENT_HOVER)
    def on_hover(ls: PoolServer, params: lsp.HoverParams) -> lsp.Hover | None:
        from pooler.lsp.navigate import hover  # noqa: PLC0415 - see LATER

        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        uri = params.text_document.uri
        text = hover(lines, line, char, ls.pools.get(uri), ls.decl_of(uri))
        return lsp.Hover(lsp.MarkupContent(lsp.MarkupKind.Markdown, text)) if text else None

    @server.feature(lsp.TEXT_DOCUMENT_DEFINITION)
    def on_definition(ls: PoolServer, params: lsp.DefinitionParams) -> lsp.Location | None:
        from pooler.lsp.navigate import definition  # noqa: PLC0415 - see LATER

        lines, line, char = ls.cursor(params.text_document.uri, params.position)
        target = definition(lines, line, char, ls.pools.get(params.text_document.uri))
        if target is None:
            return None
        uri = from_fs_path(absolute(target.file)) or target.file
        span = Span(target.line, target.char, target.line, target.end)
        return lsp.Location(uri, ls.to_client(ls.lines_of(uri), span))

    @server.feature(lsp.TEXT_DOCUMENT_CODE_ACTION,
                    lsp.CodeActionOptions(code_action_kinds=[lsp.CodeActionKind.QuickFix]))
    def code_action(ls: PoolServer, params: lsp.CodeActionParams) -> list[lsp.CodeAction]:
        uri = params.text_document.uri
        wanted, lines = params.range, ls.lines_of(uri)
        actions = []
        for finding in ls.fixes.get(uri, []):
            fix = finding.fix
            if fix is None:
                continue
            diag_range = ls.to_client(lines, finding.span)
            if diag_range.end.line < wanted.start.line or diag_range.start.line > wanted.end.line:
                continue
            edit = lsp.TextEdit(ls.to_client(lines, Span(fix.line, fix.char, fix.line, fix.end)), fix.right)
            actions.append(lsp.CodeAction(
                f"Change {fix.wrong} to {fix.right}", kind=lsp.CodeActionKind.QuickFix,
                diagnostics=[ls.diagnostic(finding, lines)], is_preferred=True,
                edit=lsp.WorkspaceEdit(changes={uri: [edit]})))
        return actions

    return server
