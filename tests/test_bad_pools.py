"""Every broken pool in tests/pools/ against the exact problems it must give, location included.

Each file is loaded with ``load_pool(partial=True)`` and compiled with ``compile_pool``, as ``pooler
check`` does;
the headlines (``file:line:column: message``) of all its problems are pinned, in order.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import ROOT

from pooler.errors import CheckFailed, InputError, PoolerError, Problem
from pooler.pool.checks import check_pool
from pooler.pool.compiler import compile_pool
from pooler.pool.loader import load_pool

POOLS = ROOT / "tests" / "pools"

EXPECTED: list[tuple[str, list[str]]] = [
    ('bad-alias-bomb.yaml', [
        ('tests/pools/bad-alias-bomb.yaml:7:4: the file expands to more than 1,000,000 values '
         'through aliases (&anchor and *alias) - write it without such repetition.'),
    ]),
    ('bad-alias-loop.yaml', [
        ('tests/pools/bad-alias-loop.yaml:4:13: an alias refers to a value that holds it - a '
         'pool file cannot hold a loop; write the value out.'),
    ]),
    ('bad-breaker-true.yaml', [
        ('tests/pools/bad-breaker-true.yaml:1:10: breaker is on by default - write {after: 5, wait: 60} '
         'to set it, or false to turn it off.'),
    ]),
    ('bad-breaker.yaml', [
        'tests/pools/bad-breaker.yaml:2:11: adaptive must be true or false, not the text "yes".',
        'tests/pools/bad-breaker.yaml:3:18: breaker.after must be at least 1, not 0.',
        'tests/pools/bad-breaker.yaml:3:27: breaker.wait must be at most 3600, not 7200.',
        'tests/pools/bad-breaker.yaml:3:33: Unknown key [tries] in breaker - breaker takes: after, wait.',
    ]),
    ('bad-chunk-field-in-params.yaml', [
        ('tests/pools/bad-chunk-field-in-params.yaml:6:7: params.goods of step 1 is filled with '
         "each chunk's rows - remove it from params."),
    ]),
    ('bad-chunk-no-field.yaml', [
        ('tests/pools/bad-chunk-no-field.yaml:6:14: for_each of step 1 has chunk but no field - '
         "name the params field that receives each chunk's rows, like field: goods."),
    ]),
    ('bad-cut-off.json', [
        ('tests/pools/bad-cut-off.json:4:1: tests/pools/bad-cut-off.json is not whole json - '
         "line 4 column 1: Expecting ',' delimiter; fix the JSON there (is the file cut off?)"),
    ]),
    ('bad-debug-type.yaml', [
        ('tests/pools/bad-debug-type.yaml:4:12: debug of step 1 must be true or false, not the '
         'text "yes".'),
    ]),
    ('bad-duplicate-key.json', [
        ('tests/pools/bad-duplicate-key.json:3:46: Duplicate key [name] - the first is on line '
         '3; a mapping holds each key once.'),
    ]),
    ('bad-duplicate-key.yaml', [
        ('tests/pools/bad-duplicate-key.yaml:6:7: Duplicate key [name] - the first is on line 5; '
         'a mapping holds each key once.'),
    ]),
    ('bad-duplicate-keys.yaml', [
        ('tests/pools/bad-duplicate-keys.yaml:8:10: Two steps carry the key [order-1] - steps 1 '
         'and 2; keys must be unique in a pool: a keyed call runs at most once per task.'),
    ]),
    ('bad-empty-pool.yaml', [
        ('tests/pools/bad-empty-pool.yaml:2:7: pool is required - the list of steps is empty; '
         'give at least one step.'),
    ]),
    ('bad-empty.yaml', [
        ('tests/pools/bad-empty.yaml: pool is required - the file is empty; give the steps as a '
         'list under pool, or name a JSON file of them with pool_source.'),
    ]),
    ('bad-env-template.yaml', [
        ('tests/pools/bad-env-template.yaml:5:15: ${env.SHOP_TOKEN} reads the environment '
         'directly, which a pool may not do - declare a variable under vars with env: SHOP_TOKEN '
         '(vars: {shop_token: {env: SHOP_TOKEN}}) and write ${shop_token}.'),
    ]),
    ('bad-field-no-chunk.yaml', [
        ('tests/pools/bad-field-no-chunk.yaml:6:14: for_each of step 1 has field but no chunk - '
         'give chunk: N, how many rows one call sends.'),
    ]),
    ('bad-for-each-both.yaml', [
        ('tests/pools/bad-for-each-both.yaml:7:15: for_each of step 2 names both file and step - '
         "keep one: rows come from a data file or from a step's table."),
    ]),
    ('bad-for-each-neither.yaml', [
        ('tests/pools/bad-for-each-neither.yaml:4:15: for_each of step 1 needs file (a data file '
         'of rows) or step (an earlier step whose table gives the rows).'),
    ]),
    ('bad-for-each-no-table.yaml', [
        ('tests/pools/bad-for-each-no-table.yaml:7:15: for_each of step 2 takes rows from step '
         "[list] but names no table - add table: with the name of that step's table."),
    ]),
    ('bad-for-each-step-later.yaml', [
        ('tests/pools/bad-for-each-step-later.yaml:4:22: for_each.step of step 1 names step 2 '
         '[list], which does not come before it - rows come from the table of an earlier step.'),
    ]),
    ('bad-for-each-table-with-file.yaml', [
        ('tests/pools/bad-for-each-table-with-file.yaml:4:45: for_each.table of step 1 goes with '
         'step, not with file - remove it.'),
    ]),
    ('bad-format-unknown.yaml', [
        ('tests/pools/bad-format-unknown.yaml:4:22: for_each of step 1: the format of '
         'data/goods.txt cannot be told from its name - name it .csv, .jsonl or .json, or give '
         'format: csv, jsonl or json.'),
    ]),
    ('bad-into-path.yaml', [
        ('tests/pools/bad-into-path.yaml:4:11: into is the bare name of a job - [jobs/currency] '
         'holds a path, a dot or a space; write one word, like photos.'),
    ]),
    ('bad-key-every-row.yaml', [
        ('tests/pools/bad-key-every-row.yaml:4:10: The key of step 1 is the same for every row - '
         'a step over rows needs ${row...} in its key, like goods-${row.id}.'),
    ]),
    ('bad-max-concurrency-type.json', [
        ('tests/pools/bad-max-concurrency-type.json:1:41: max_concurrency must be a whole '
         'number, not the text "4".'),
    ]),
    ('bad-max-concurrency.yaml', [
        ('tests/pools/bad-max-concurrency.yaml:2:18: max_concurrency must be 1 to 16, not 20 - a '
         'pool sends at most 16 calls at once.'),
    ]),
    ('bad-mode.yaml', [
        ('tests/pools/bad-mode.yaml:1:7: Unknown mode [paralel] - did you mean parallel? The '
         'mode is sequential or parallel.'),
    ]),
    ('bad-name-dot.yaml', [
        ('tests/pools/bad-name-dot.yaml:2:11: The name of step 1 carries a dot - @cur.eur.field '
         'would read it as a path; name it cur_eur.'),
    ]),
    ('bad-nan.yaml', [
        ('tests/pools/bad-nan.yaml:4:37: .nan is not a number JSON can carry - write a real '
         'number, or text in quotes.'),
    ]),
    ('bad-no-pool.yaml', [
        ('tests/pools/bad-no-pool.yaml:1:1: pool is required - give the steps as a list under '
         'pool, or name a JSON file of them with pool_source.'),
    ]),
    ('bad-not-utf8.yaml', [
        ('tests/pools/bad-not-utf8.yaml:4:26: tests/pools/bad-not-utf8.yaml is not utf-8 text - '
         'save it in utf-8.'),
    ]),
    ('bad-params-and-source.yaml', [
        ('tests/pools/bad-params-and-source.yaml:5:5: params or params_source, not both - keep '
         'the fields under params, or the file of them under params_source.'),
    ]),
    ('bad-params-list.yaml', [
        'tests/pools/bad-params-list.yaml:6:13: params of step 2 must be an object, not a list.',
    ]),
    ('bad-params-source-list.yaml', [
        ('tests/pools/data/params-list.json:1:1: tests/pools/data/params-list.json holds no '
         'object of fields - it holds a list; write the fields as a JSON object: {"name": '
         '"value"}.'),
    ]),
    ('bad-params-source-missing.yaml', [
        ('tests/pools/bad-params-source-missing.yaml:4:20: No such file: '
         'tests/pools/data/no-such-params.json'),
    ]),
    ('bad-pool-and-source.yaml', [
        ('tests/pools/bad-pool-and-source.yaml:4:1: pool or pool_source, not both - keep the '
         'steps under pool, or the file of them under pool_source.'),
    ]),
    ('bad-probe-no-landed.yaml', [
        ("tests/pools/bad-probe-no-landed.yaml:8:7: probe of step 1 needs command and landed - landed is "
         "missing; landed names the field of the probe's detail that is true when the call landed, like "
         "landed: found."),
        ('tests/pools/bad-probe-no-landed.yaml:10:7: Unknown key [landd] in probe of step 1 - did you mean '
         'landed?'),
    ]),
    ('bad-probe-template.yaml', [
        ('tests/pools/bad-probe-template.yaml:8:45: ${skuu} in probe.params.sku of step 1 names no '
         'variable - did you mean sku?'),
    ]),
    ('bad-rate.yaml', [
        'tests/pools/bad-rate.yaml:1:20: rate.per_second must be at least 0.01, not 0.',
        'tests/pools/bad-rate.yaml:1:30: rate.burst must be at least 1, not 0.',
        ('tests/pools/bad-rate.yaml:1:38: rate.key [a..b] is not a dotted path into params - write it '
         'like warehouse or order.ref.'),
        'tests/pools/bad-rate.yaml:1:46: Unknown key [x] in rate - rate takes: per_second, burst, key.',
        ('tests/pools/bad-rate.yaml:5:11: rate of step 1 needs per_second - how many calls a second may '
         'start, like {per_second: 20}.'),
        ('tests/pools/bad-rate.yaml:9:24: rate.per_second of step 2 must be a number, not the text '
         '"fast".'),
    ]),
    ('bad-ref-later.yaml', [
        ('tests/pools/bad-ref-later.yaml:4:37: @cur.id refers to step 2, which comes later - it '
         'would be sent as text; move step 2 before step 1.'),
    ]),
    ('bad-ref-no-field.yaml', [
        ('tests/pools/bad-ref-no-field.yaml:8:18: @cur names step 1 but no field of its detail - '
         'write @cur.id (the field you need), or @@cur to send the text @cur.'),
    ]),
    ('bad-ref-self.yaml', [
        ("tests/pools/bad-ref-self.yaml:5:18: @cur.id refers to its own step - a step's detail "
         'exists only after it ran; refer to an earlier step.'),
    ]),
    ('bad-ref-unknown.yaml', [
        ('tests/pools/bad-ref-unknown.yaml:10:19: @curr.id names no step - it would be sent as '
         'text. Did you mean @cur.id? Write @@curr.id to send a literal @.'),
    ]),
    ('bad-reserved-step-name.yaml', [
        ('tests/pools/bad-reserved-step-name.yaml:2:11: The name of step 1 is reserved: [row] - '
         'templates use it for something else; pick another name.'),
    ]),
    ('bad-reserved-var.yaml', [
        ('tests/pools/bad-reserved-var.yaml:2:3: The variable name [env] is reserved - ${env...} '
         'means something else in a template; pick another name.'),
    ]),
    ('bad-retry-attempts.yaml', [
        ('tests/pools/bad-retry-attempts.yaml:4:23: retry.attempts of step 1 must be at least 1, '
         'not 0.'),
    ]),
    ('bad-retry-busy.yaml', [
        'tests/pools/bad-retry-busy.yaml:1:19: retry.busy_for must be at least 0, not -5.',
        ('tests/pools/bad-retry-busy.yaml:5:36: retry.busy_for of step 1 must be a number, not the '
         'text "ten".'),
        ('tests/pools/bad-retry-busy.yaml:9:69: retry.refusals of step 2: /tables are (busy/ is not a '
         'regular expression: missing ), unterminated subpattern at position 11.'),
        ('tests/pools/bad-retry-busy.yaml:9:91: retry.refusals of step 2: // is an empty regular '
         'expression - it would take every refusal for busy; write the text to look for.'),
    ]),
    ('bad-retry-unknown.yaml', [
        ('tests/pools/bad-retry-unknown.yaml:5:7: Unknown key [attemps] in retry of step 1 - did '
         'you mean attempts?'),
    ]),
    ('bad-row-in-chunk.yaml', [
        ('tests/pools/bad-row-in-chunk.yaml:5:21: ${row.sku} in params.note of step 1: a step '
         'with chunk sends its rows in goods, so there is no single row here - shape each row with '
         'chunk_row.'),
    ]),
    ('bad-row-outside.yaml', [
        ('tests/pools/bad-row-outside.yaml:4:20: ${row.sku} in params.sku of step 1: only a step '
         'with for_each has a row - give the step for_each, or use a variable.'),
    ]),
    ('bad-schema-and-meaning.yaml', [
        ('tests/pools/bad-schema-and-meaning.yaml:2:7: Unknown mode [paralel] - did you mean parallel? '
         'The mode is sequential or parallel.'),
        ('tests/pools/bad-schema-and-meaning.yaml:4:25: Unknown key [sekret] in variable shop - did you '
         'mean secret?'),
        ('tests/pools/bad-schema-and-meaning.yaml:9:23: retry.attempts of step 1 must be a whole number, '
         'not the text "3".'),
        ('tests/pools/bad-schema-and-meaning.yaml:13:36: ${shopp} in params.name of step 2 names no '
         'variable - did you mean shop?'),
        ("tests/pools/bad-schema-and-meaning.yaml:14:11: into is the bare name of a job - [rates+eur] "
         "holds '+'; use only letters, digits, _ and -."),
        ('tests/pools/bad-schema-and-meaning.yaml:17:18: @crr.id names no step - it would be sent as '
         'text. Did you mean @cur.id? Write @@crr.id to send a literal @.'),
    ]),
    ('bad-serialize-on-path.yaml', [
        ('tests/pools/bad-serialize-on-path.yaml:2:15: serialize_on [order..ref] is not a dotted '
         'path into params - write it like contract or order.ref.'),
    ]),
    ('bad-serialize-on-sequential.yaml', [
        ('tests/pools/bad-serialize-on-sequential.yaml:1:15: serialize_on goes with mode: '
         'parallel - with mode: sequential it would silently do nothing; set mode: parallel, or '
         'remove serialize_on.'),
    ]),
    ('bad-source-cut-off.yaml', [
        ('tests/pools/data/cut.json:3:1: tests/pools/data/cut.json is not whole json - line 3 '
         "column 1: Expecting ',' delimiter; fix the JSON there (is the file cut off?)"),
    ]),
    ('bad-source-empty-list.yaml', [
        ('tests/pools/data/empty-list.json:1:1: pool is required - the list of steps in '
         'tests/pools/data/empty-list.json is empty; give at least one step.'),
    ]),
    ('bad-source-missing.yaml', [
        ('tests/pools/bad-source-missing.yaml:2:14: No such file: '
         'tests/pools/data/no-such-steps.json'),
    ]),
    ('bad-source-not-utf8.yaml', [
        ('tests/pools/data/latin1.json:1:83: tests/pools/data/latin1.json is not utf-8 text - '
         'save it in utf-8.'),
    ]),
    ('bad-source-object.yaml', [
        ('tests/pools/data/object.json:1:1: tests/pools/data/object.json holds no list of steps '
         '- it holds an object; write the steps as a JSON list: [{"unit": "...", "command": '
         '"...", "params": {...}}].'),
    ]),
    ('bad-source-step-key.yaml', [
        ('tests/pools/data/steps-bad-key.json:3:3: Step 2 needs unit and command - command is '
         "missing; `pooler tools` lists the store's tools and their commands."),
        ('tests/pools/data/steps-bad-key.json:3:33: Unknown key [comand] in step 2 - did you '
         'mean command?'),
    ]),
    ('bad-source-zero-byte.yaml', [
        ('tests/pools/data/zero.json:1:54: tests/pools/data/zero.json holds a NUL character (a zero '
         'byte) at line 1, column 54 - YAML and JSON do not allow it; remove it.'),
    ]),
    ('bad-step-at-top.yaml', [
        ('tests/pools/bad-step-at-top.yaml:1:1: pool is required - give the steps as a list '
         'under pool, or name a JSON file of them with pool_source.'),
        ("tests/pools/bad-step-at-top.yaml:1:1: Unknown key [unit] in the pool file's top level "
         '- unit belongs to a step: put the step in the list under pool.'),
        ("tests/pools/bad-step-at-top.yaml:2:1: Unknown key [command] in the pool file's top "
         'level - command belongs to a step: put the step in the list under pool.'),
    ]),
    ('bad-step-files-source.json', [
        ('tests/pools/bad-step-files-source.json:3:4: Step 1 carries files - a step is pure '
         'JSON; send attachments with `pooler call UNIT COMMAND --files-source FILE`.'),
    ]),
    ('bad-step-files.yaml', [
        ('tests/pools/bad-step-files.yaml:5:5: Step 1 carries files - a step is pure JSON; send '
         'attachments with `pooler call UNIT COMMAND --files-source FILE`.'),
    ]),
    ('bad-step-no-command.yaml', [
        ('tests/pools/bad-step-no-command.yaml:4:5: Step 2 needs unit and command - command is '
         "missing; `pooler tools` lists the store's tools and their commands."),
    ]),
    ('bad-step-no-unit-command.json', [
        ('tests/pools/bad-step-no-unit-command.json:2:3: Step 1 needs unit and command - unit '
         "and command are missing; `pooler tools` lists the store's tools and their commands."),
    ]),
    ('bad-step-not-object.yaml', [
        ('tests/pools/bad-step-not-object.yaml:4:5: Step 2 is not an object - write it as a '
         'mapping of unit, command and params.'),
    ]),
    ('bad-tab-indent.yaml', [
        ('tests/pools/bad-tab-indent.yaml:3:1: a tab indents this line - YAML indents with '
         'spaces only; replace the tab with spaces.'),
    ]),
    ('bad-tag.yaml', [
        ('tests/pools/bad-tag.yaml:4:13: the tag !!python/object/apply:os.system is not '
         'supported - a pool file holds JSON values only: text, numbers, true/false, null, lists '
         'and mappings.'),
    ]),
    ('bad-tolerate.yaml', [
        ('tests/pools/bad-tolerate.yaml:1:20: tolerate.failed must be a number of calls (25) or a '
         'percent of the planned calls (2%), not the text "2x".'),
        ('tests/pools/bad-tolerate.yaml:1:34: tolerate.in_doubt must be at most 100% of the planned '
         'calls - 101% is over 100%.'),
        ('tests/pools/bad-tolerate.yaml:5:24: tolerate.failed of step 1 must be a number of calls (25) '
         'or a percent of the planned calls (2%), not -1.'),
        ('tests/pools/bad-tolerate.yaml:5:28: Unknown key [in_dobt] in tolerate of step 1 - did you mean '
         'in_doubt?'),
        ('tests/pools/bad-tolerate.yaml:9:24: tolerate.failed of step 2 must be a number of calls (25) '
         'or a percent of the planned calls (2%), not 2.5.'),
    ]),
    ('bad-too-deep.yaml', [
        ('tests/pools/bad-too-deep.yaml:4:74: the file nests deeper than 64 levels - a pool '
         'needs only a few; flatten the data.'),
    ]),
    ('bad-top-list.yaml', [
        ('tests/pools/bad-top-list.yaml:1:1: A pool file holds a mapping with pool: [steps], not '
         'a list - put the list of steps under pool.'),
    ]),
    ('bad-twin-names.yaml', [
        ('tests/pools/bad-twin-names.yaml:6:11: Two steps are named [CUR] - steps 1 and 2; give '
         'each step its own name (case is not told apart).'),
    ]),
    ('bad-two-documents.yaml', [
        ('tests/pools/bad-two-documents.yaml:4:1: not valid YAML: expected a single document in '
         'the stream, but found another document - fix the syntax at this spot.'),
    ]),
    ('bad-unclosed-template.yaml', [
        ('tests/pools/bad-unclosed-template.yaml:6:19: params.sku of step 1 opens ${ but never '
         "closes it: '${sku' - write ${name}, or $${ for a literal ${."),
    ]),
    ('bad-unit-type.yaml', [
        'tests/pools/bad-unit-type.yaml:2:11: unit of step 1 must be a string, not 5.',
    ]),
    ('bad-unknown-step-key.yaml', [
        ('tests/pools/bad-unknown-step-key.yaml:4:5: Unknown key [parms] in step 1 - did you '
         'mean params?'),
    ]),
    ('bad-unknown-top-key.yaml', [
        ('tests/pools/bad-unknown-top-key.yaml:1:1: Unknown key [stop_on_eror] in the pool '
         "file's top level - did you mean stop_on_error?"),
    ]),
    ('bad-var-env.yaml', [
        ('tests/pools/bad-var-env.yaml:2:16: env of variable token must be the name of an '
         'environment variable (letters, digits and _), not the text "SHOP-TOKEN".'),
    ]),
    ('bad-var-list.yaml', [
        ('tests/pools/bad-var-list.yaml:2:8: variable ids must be a value (text, a number, '
         'true/false or null) or a declaration {default, description, env, secret}, not a list - '
         'put a list or an object under default.'),
    ]),
    ('bad-var-name.yaml', [
        ('tests/pools/bad-var-name.yaml:2:3: The variable name [1st] is not a name - use '
         'letters, digits and _, not starting with a digit.'),
    ]),
    ('bad-var-undeclared.yaml', [
        ('tests/pools/bad-var-undeclared.yaml:6:21: ${curency} in params.skey of step 1 names no '
         'variable - did you mean currency?'),
    ]),
    ('bad-var-unknown-key.yaml', [
        ('tests/pools/bad-var-unknown-key.yaml:2:28: Unknown key [secrett] in variable token - '
         'did you mean secret?'),
    ]),
    ('bad-yaml-syntax.yaml', [
        ('tests/pools/bad-yaml-syntax.yaml:3:20: not valid YAML: mapping values are not allowed '
         'in this context - fix the syntax at this spot.'),
    ]),
    ('bad-zero-byte.yaml', [
        ('tests/pools/bad-zero-byte.yaml:3:17: tests/pools/bad-zero-byte.yaml holds a NUL character '
         '(a zero byte) at line 3, column 17 - YAML and JSON do not allow it; remove it.'),
    ]),
]


def problems_of(name: str) -> list[Problem]:
    """What ``pooler check`` reports for a pool file: the loader's problems and the compile step's
    meaning problems together, in the file's order."""
    try:
        compile_pool(load_pool(f"tests/pools/{name}", partial=True), read_data=False)
    except PoolerError as exc:
        return list(exc.problems())
    return []


@pytest.fixture(autouse=True)
def _in_root(monkeypatch: pytest.MonkeyPatch) -> None:
    # Paths in the messages are the paths as given: relative to the project's root here.
    monkeypatch.chdir(ROOT)


@pytest.mark.parametrize(("name", "expected"), EXPECTED, ids=[name for name, _ in EXPECTED])
def test_bad_pool(name: str, expected: list[str]) -> None:
    assert [p.headline() for p in problems_of(name)] == expected


def test_every_bad_pool_is_in_the_table() -> None:
    on_disk = sorted(p.name for p in POOLS.glob("bad-*"))
    assert on_disk == sorted(name for name, _ in EXPECTED)
    assert len(on_disk) >= 45


@pytest.mark.parametrize("name", sorted(p.name for p in POOLS.glob("good-*")))
def test_good_pool_has_no_problem(name: str) -> None:
    pool = load_pool(f"tests/pools/{name}")
    assert check_pool(pool) == []
    assert pool.steps


def test_a_problem_renders_with_the_line_and_a_caret() -> None:
    (problem,) = problems_of("bad-unknown-step-key.yaml")
    assert problem.render() == (
        "tests/pools/bad-unknown-step-key.yaml:4:5: Unknown key [parms] in step 1 - did you mean params?\n"
        "    4 |     parms: {name: Euro}\n"
        "      |     ^"
    )
    assert problem.step == 1
    assert problem.path == "pool[0].parms.<key>"


def test_unreadable_files_raise_input_error_and_structure_check_failed() -> None:
    with pytest.raises(InputError) as syntax:
        load_pool("tests/pools/bad-yaml-syntax.yaml")
    assert syntax.value.problem.line == 3
    with pytest.raises(CheckFailed) as structure:
        load_pool("tests/pools/bad-twin-names.yaml")
    assert structure.value.problem.step == 2


def test_all_structural_problems_come_at_once(tmp_path: Path) -> None:
    pool = tmp_path / "many.yaml"
    pool.write_text(
        "pool:\n"
        "  - unit: U\n"
        "  - 7\n"
        "  - {unit: U, command: C, name: a.b, files: []}\n"
        "  - {unit: U, command: C, nmae: x}\n",
        encoding="utf-8",
    )
    with pytest.raises(CheckFailed) as failed:
        load_pool(pool)
    assert [p.headline().split(": ", 1)[1].split(" - ")[0] for p in failed.value.problems()] == [
        "Step 1 needs unit and command",
        "Step 2 is not an object",
        "The name of step 3 carries a dot",
        "Step 3 carries files",
        "Unknown key [nmae] in step 4",
    ]
    where = [(p.line, p.column) for p in failed.value.problems()]
    assert where == [(2, 5), (3, 5), (4, 33), (4, 38), (5, 27)]


def test_the_same_pool_from_another_folder_names_the_files_it_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(POOLS)
    (problem,) = problems_of_here("bad-source-missing.yaml")
    assert problem.headline() == "bad-source-missing.yaml:2:14: No such file: data/no-such-steps.json"


def problems_of_here(name: str) -> list[Problem]:
    try:
        load_pool(name)
    except PoolerError as exc:
        return list(exc.problems())
    return []
