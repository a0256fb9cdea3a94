"""Pool files (YAML or JSON) into ``model.Pool``: read once, positions kept, every structural
problem told at once.

The order of the work: parse (``InputError``: the file cannot be read), then the schema and the
seed's refusals together (``CheckFailed`` with all of them), then the model is built; with
``partial`` the model is built anyway, the problems kept in it for the compile step to tell with the
rest.  A relative ``pool_source`` or ``params_source`` is read relative to the file that names it.
The meaning checks (references, variables, keys, options) are ``pooler.pool.checks``.
"""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

from pooler.errors import CheckFailed, InputError, Problem, in_order
from pooler.pool.breaker import breaker_of
from pooler.pool.budget import tolerate_of
from pooler.pool.documents import MAX_BYTES, Document, parse_document, parse_text, read_document, read_text
from pooler.pool.marks import KEY, LazyPositions
from pooler.pool.model import (
    Compare,
    ForEach,
    JsonPath,
    Options,
    Pool,
    Probe,
    Retry,
    Source,
    Step,
    Variable,
    format_path,
)
from pooler.pool.rate import rate_of
from pooler.pool.schema_problems import kind_of, schema_problems

OPTION_NAMES: tuple[str, ...] = (
    "mode", "max_concurrency", "serialize_on", "stop_on_error", "include_results", "adaptive",
)


def load_pool(path: str | Path, *, max_bytes: int = MAX_BYTES, partial: bool = False,
              text: str | None = None) -> Pool:
    """Load a pool file.  ``InputError`` when it cannot be read or parsed, ``CheckFailed`` with every
    structural problem (the schema's and the seed's refusals) when it is not a pool.

    With ``partial`` a pool whose list of steps could be read is returned despite its structural
    problems: they ride in ``Pool.problems``, the steps they leave unreadable stand in by name only
    (``Pool.broken``), and ``compile_pool`` tells them together with the meaning problems of the
    rest, so one check shows everything that is wrong.

    ``text`` is the file's text when it is not to be read from disk (an editor's unsaved buffer);
    the files it names are still read from disk.
    """
    file = str(path)
    if text is None:
        doc = read_document(Path(path), file, max_bytes=max_bytes)
    else:
        doc = parse_document(text, Path(path), file)
    return _Loader(file, Path(path).parent, max_bytes).load(doc.value, doc.source, partial=partial)


def load_pool_value(value: Any, *, file: str = "<pool>", base: Path, partial: bool = False) -> Pool:
    """The same from a value in memory (JSON arguments of an MCP call); no positions.
    ``base`` is the folder a relative ``pool_source``/``params_source`` is read from, and (kept as
    ``Pool.base``) the one the executor reads the steps' data files from."""
    return _Loader(file, base, MAX_BYTES).load(value, Source(file=file), partial=partial)


class _Loader:
    def __init__(self, file: str, base: Path, max_bytes: int) -> None:
        self.file = file
        self.base = base
        self.max_bytes = max_bytes
        self.problems: list[Problem] = []
        self.schema_later: list[Problem] = []
        #: Steps that stand in by name only (``Pool.broken``).
        self.broken: set[int] = set()
        #: The paths of the problems told about each step, by step number.
        self.told: dict[int, list[str]] = {}

    def load(self, value: Any, source: Source, *, partial: bool = False) -> Pool:
        if not isinstance(value, dict):
            raise CheckFailed([self.not_a_pool(value, source)])
        schema_found = schema_problems(value, source)
        steps_value, steps_source, steps_at = self.steps_of(value, source)
        steps_base = self.base if steps_source is source else Path(steps_source.file).parent
        if isinstance(steps_value, list):
            self.refuse_steps(steps_value, steps_source, steps_at)
            self.problems.extend(self.schema_later)
        elif not self.problems and not schema_found:
            self.problems.append(source.problem(
                f"pool must be a list of steps, not {kind_of(steps_value)}.", ("pool",)))
        # The seed's refusals come first where nothing else orders them (values without positions).
        self.problems.extend(schema_found)
        if self.problems and not (partial and isinstance(steps_value, list)):
            raise CheckFailed(in_order(self.problems, self.file))
        for found in self.problems:
            if found.step is not None and found.path:
                self.told.setdefault(found.step, []).append(found.path)
        steps = [self.read_step(i, raw, steps_source, (*steps_at, i), steps_base)
                 for i, raw in enumerate(steps_value)]
        if self.problems and not partial:
            raise CheckFailed(in_order(self.problems, self.file))
        wrong = {p.path for p in self.problems if p.step is None and p.path}
        declared = value.get("vars")
        options = {name for name in OPTION_NAMES if name in value and not _under(wrong, name)}
        return Pool(
            file=self.file,
            steps=steps,
            document=_document(value, steps_value, steps),
            options=_options({name: value[name] for name in options}),
            description=str(value.get("description", "")),
            variables=_variables(declared, wrong) if isinstance(declared, dict) else {},
            source=source,
            options_set=frozenset(options),
            tolerate=None if _under(wrong, "tolerate") else tolerate_of(value.get("tolerate")),
            rate=None if _under(wrong, "rate") else rate_of(value.get("rate")),
            breaker=breaker_of(None if _under(wrong, "breaker") else value.get("breaker")),
            busy_for=None if _under(wrong, "retry") else _busy_for(value.get("retry")),
            base=str(self.base),
            problems=tuple(in_order(self.problems, self.file)),
            broken=frozenset(self.broken),
            readable=declared is None or isinstance(declared, dict),
        )

    def not_a_pool(self, value: Any, source: Source) -> Problem:
        if value is None:
            return source.problem("pool is required - the file is empty; give the steps as a list under "
                                  "pool, or name a JSON file of them with pool_source.")
        return source.problem(f"A pool file holds a mapping with pool: [steps], not {kind_of(value)} - "
                              "put the list of steps under pool.")

    def steps_of(self, value: dict[str, Any], source: Source) -> tuple[Any, Source, JsonPath]:
        """The list of steps, the file it stands in, and its path there (the seed's first refusals)."""
        has_pool, has_source = "pool" in value, "pool_source" in value
        if has_pool and has_source:
            self.problems.append(source.problem(
                "pool or pool_source, not both - keep the steps under pool, or the file of them under "
                "pool_source.", ("pool_source", KEY)))
            return None, source, ("pool",)
        if not has_pool and not has_source:
            self.problems.append(source.problem(
                "pool is required - give the steps as a list under pool, or name a JSON file of them "
                "with pool_source.", ()))
            return None, source, ("pool",)
        if has_pool:
            steps = value["pool"]
            if isinstance(steps, list) and not steps:
                self.problems.append(source.problem(
                    "pool is required - the list of steps is empty; give at least one step.", ("pool",)))
            return steps, source, ("pool",)
        name = value["pool_source"]
        if not isinstance(name, str) or not name:
            return None, source, ("pool",)  # the schema tells what pool_source must be
        doc = self.read_json(name, self.base, source, ("pool_source",))
        if doc is None:
            return None, source, ("pool",)
        if not isinstance(doc.value, list):
            self.problems.append(doc.source.problem(
                f"{doc.source.file} holds no list of steps - it holds {kind_of(doc.value)}; write the steps "
                'as a JSON list: [{"unit": "...", "command": "...", "params": {...}}].', ()))
            return None, source, ("pool",)
        if not doc.value:
            self.problems.append(doc.source.problem(
                f"pool is required - the list of steps in {doc.source.file} is empty; give at least one "
                "step.", ()))
        self.schema_later.extend(schema_problems(doc.value, doc.source, "steps"))
        return doc.value, doc.source, ()

    def read_json(self, name: str, base: Path, naming: Source, at: JsonPath) -> Document | None:
        """A JSON file named at ``at`` of ``naming``; None (and a problem) when it cannot be had."""
        path = Path(name)
        if not path.is_absolute():
            path = base / path
        display = str(path)
        try:
            text = read_text(path, display, max_bytes=self.max_bytes)
            return parse_text(text, display, as_json=True)
        except InputError as exc:
            found = exc.problem
            if found.line is None:
                found = naming.problem(found.message, at, step=_step_num(at))
            self.problems.append(found)
            return None

    def refuse_steps(self, steps: list[Any], source: Source, at: JsonPath) -> None:
        """The seed's refusals of steps: not an object, no unit or command, files, dots, twins."""
        seen: dict[str, int] = {}
        for i, raw in enumerate(steps):
            num, here = i + 1, (*at, i)
            if not isinstance(raw, dict):
                self.problems.append(source.problem(
                    f"Step {num} is not an object - write it as a mapping of unit, command and params.",
                    here, step=num))
                continue
            missing = [k for k in ("unit", "command") if not _given(raw.get(k))]
            if missing:
                self.problems.append(source.problem(
                    f"Step {num} needs unit and command - {' and '.join(missing)} "
                    f"{'is' if len(missing) == 1 else 'are'} missing; `pooler tools` lists the store's "
                    "tools and their commands.", here, step=num))
            for key in ("files", "files_source"):
                if key in raw:
                    self.problems.append(source.problem(
                        f"Step {num} carries files - a step is pure JSON; send attachments with "
                        "`pooler call UNIT COMMAND --files-source FILE`.", (*here, key, KEY), step=num))
            if raw.get("params") is not None and "params_source" in raw:
                self.problems.append(source.problem(
                    "params or params_source, not both - keep the fields under params, or the file of "
                    "them under params_source.", (*here, "params_source", KEY), step=num))
            name = raw.get("name")
            if not isinstance(name, str) or not name:
                continue
            if "." in name:
                self.problems.append(source.problem(
                    f"The name of step {num} carries a dot - @{name}.field would read it as a path; "
                    f"name it {name.replace('.', '_')}.", (*here, "name"), step=num))
            first = seen.setdefault(name.lower(), num)
            if first != num:
                self.problems.append(source.problem(
                    f"Two steps are named [{name}] - steps {first} and {num}; give each step its own name "
                    "(case is not told apart).", (*here, "name"), step=num))

    def read_step(self, i: int, raw: Any, source: Source, at: JsonPath, base: Path) -> Step:
        """The step at ``at``; where a problem was told about one of its fields, the step is read
        without that field, so the rest of it is still checked (a partial load).  A step that is no
        mapping, or whose ``for_each`` is wrong (the rest of a step is read in its light), stands in
        by its name alone."""
        prefix, paths = format_path(at), self.told.get(i + 1, [])
        told = {key for key in (raw if isinstance(raw, dict) else {})
                if any(_under_path(path, f"{prefix}.{key}") for path in paths)}
        if not isinstance(raw, dict) or "for_each" in told:
            self.broken.add(i + 1)
            return _stand_in(i, raw, source, at)
        return self.step(i, {k: v for k, v in raw.items() if k not in told}, source, at, base)

    def step(self, i: int, raw: dict[str, Any], source: Source, at: JsonPath, base: Path) -> Step:
        given = raw.get("params")
        # The document's own mapping, not a copy: nothing changes a step's params once loaded, and a
        # pool of 180,000 steps would hold every one twice.
        params: dict[str, Any] = given if isinstance(given, dict) else dict(given or {})
        if "params_source" in raw and raw.get("params") is None:
            params = self.params_from(raw["params_source"], base, source, at)
        retry = raw.get("retry")
        each = raw.get("for_each")
        probe = raw.get("probe")
        return Step(
            num=i + 1,
            unit=str(raw.get("unit") or "").strip(),
            command=str(raw.get("command") or "").strip(),
            name=str(raw.get("name") or ""),
            params=params,
            debug=bool(raw.get("debug", False)),
            into=raw.get("into"),
            key=raw.get("key"),
            retry=_retry(retry) if isinstance(retry, dict) else None,
            for_each=ForEach(**each) if isinstance(each, dict) else None,
            probe=_probe(probe),
            compare=_compare(raw.get("compare")),
            chunk_row=dict(raw["chunk_row"]) if isinstance(raw.get("chunk_row"), dict) else None,
            description=str(raw.get("description", "")),
            tolerate=tolerate_of(raw.get("tolerate")),
            rate=rate_of(raw.get("rate")),
            path=at,
            source=source,
        )

    def params_from(self, name: str, base: Path, source: Source, at: JsonPath) -> dict[str, Any]:
        doc = self.read_json(name, base, source, (*at, "params_source"))
        if doc is None or not isinstance(doc.value, dict):
            self.broken.add(_step_num(at) or 0)
        if doc is None:
            return {}
        if not isinstance(doc.value, dict):
            self.problems.append(doc.source.problem(
                f"{doc.source.file} holds no object of fields - it holds {kind_of(doc.value)}; write the "
                'fields as a JSON object: {"name": "value"}.', (), step=_step_num(at)))
            return {}
        # Problems about the fields point at the params_source line of the step.
        if isinstance(source.positions, LazyPositions):
            source.positions.alias((*at, "params"), (*at, "params_source"))
        result: dict[str, Any] = doc.value
        return result


def _document(value: dict[str, Any], steps_value: Any, steps: list[Step]) -> dict[str, Any]:
    """The pool as one document, its steps and their params read from the files ``pool_source``
    and ``params_source`` name: what a task keeps, so that ``pooler redrive`` needs neither."""
    doc = {k: v for k, v in value.items() if k != "pool_source"}
    raws = steps_value if isinstance(steps_value, list) else []
    inlined = []
    for raw, step in zip(raws, steps, strict=False):
        if isinstance(raw, dict) and "params_source" in raw and raw.get("params") is None:
            inlined.append({**{k: v for k, v in raw.items() if k != "params_source"}, "params": step.params})
        else:
            inlined.append(raw)
    doc["pool"] = inlined
    return doc


def _given(value: Any) -> bool:
    return value is not None and (not isinstance(value, str) or bool(value.strip()))


def _step_num(at: JsonPath) -> int | None:
    for part in at:
        if isinstance(part, int):
            return part + 1
    return None


def _stand_in(i: int, raw: Any, source: Source, at: JsonPath) -> Step:
    """A step the loader could not read, kept by its name so the steps after it that refer to it
    are checked as they will be once it is mended; its own meaning problems wait for that."""
    fields = raw if isinstance(raw, dict) else {}
    name = fields.get("name")

    def text(key: str) -> str:
        found = fields.get(key)
        return found.strip() if isinstance(found, str) else ""

    return Step(num=i + 1, unit=text("unit"), command=text("command"),
                name=name if isinstance(name, str) and "." not in name else "",
                path=(*at, i), source=source)


def _under(paths: Collection[str], name: str) -> bool:
    """Whether one of the problems' paths is ``name`` or below it."""
    return any(_under_path(p, name) for p in paths)


def _under_path(path: str, name: str) -> bool:
    return path == name or path.startswith((f"{name}.", f"{name}["))


def _options(value: dict[str, Any]) -> Options:
    defaults = Options()
    return Options(
        mode=value.get("mode", defaults.mode),
        max_concurrency=value.get("max_concurrency", defaults.max_concurrency),
        serialize_on=value.get("serialize_on", defaults.serialize_on),
        stop_on_error=value.get("stop_on_error", defaults.stop_on_error),
        include_results=value.get("include_results", defaults.include_results),
        adaptive=value.get("adaptive", defaults.adaptive),
    )


def _variables(raw: dict[str, Any], wrong: Collection[str] = ()) -> dict[str, Variable]:
    """Declarations; a bare value is the default, and a bare null declares one with no default.
    A declaration with a problem (``wrong`` holds the problems' paths) is kept as declared, with an
    empty default, so the templates that use it are not told as naming no variable."""
    out: dict[str, Variable] = {}
    for name, spec in raw.items():
        if _under(wrong, f"vars.{name}"):
            out[name] = Variable(name=name, has_default=True, default="")
        elif isinstance(spec, dict):
            out[name] = Variable(
                name=name,
                description=str(spec.get("description", "")),
                has_default="default" in spec,
                default=spec.get("default"),
                env=spec.get("env"),
                secret=bool(spec["secret"]) if "secret" in spec else None,
            )
        else:
            out[name] = Variable(name=name, has_default=spec is not None, default=spec)
    return out


def _probe(raw: Any) -> Probe | None:
    """A step's ``probe`` as the schema let it through (a partial load drops one it refused)."""
    if not isinstance(raw, dict) or not isinstance(raw.get("command"), str) \
            or not isinstance(raw.get("landed"), str):
        return None
    unit = raw.get("unit")
    return Probe(command=raw["command"].strip(), landed=raw["landed"],
                 unit=unit.strip() if isinstance(unit, str) else None,
                 params=dict(raw.get("params") or {}), detail=raw.get("detail"))


def _compare(raw: Any) -> Compare | None:
    """A step's ``compare`` as the schema let it through (a partial load drops one it refused)."""
    if not isinstance(raw, dict) or not all(isinstance(raw.get(k), str) for k in ("command", "table")) \
            or not all(isinstance(raw.get(k), dict) for k in ("match", "fields")):
        return None
    unit = raw.get("unit")
    return Compare(command=raw["command"].strip(), table=raw["table"],
                   match={str(k): str(v) for k, v in raw["match"].items()},
                   fields={str(k): str(v) for k, v in raw["fields"].items()},
                   unit=unit.strip() if isinstance(unit, str) else None, params=dict(raw.get("params") or {}))


def _retry(raw: dict[str, Any]) -> Retry:
    """A step's ``retry`` as the schema let it through (its refusals kept as a tuple)."""
    refusals = raw.get("refusals")
    return Retry(**{**raw, "refusals": tuple(refusals) if isinstance(refusals, list) else ()})


def _busy_for(raw: Any) -> float | None:
    """The pool's ``retry: {busy_for}`` (the schema has refused any other value)."""
    seconds = raw.get("busy_for") if isinstance(raw, dict) else None
    return float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None
