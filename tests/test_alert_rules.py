"""The alert rules docs/operations.md shows, run by Prometheus' own ``promtool test rules`` against
series like the ones ``--metrics-file`` writes: they fire when they should and only then.

promtool comes with Debian's ``prometheus`` package; where it is missing the test skips saying so,
and fails instead under ``POOLER_REQUIRE_PROMTOOL=1`` (CI).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from helpers import ROOT

REQUIRE = "POOLER_REQUIRE_PROMTOOL"
LABELS = 'pool="nightly.yaml",store="shop"'

TESTS = f"""\
rule_files: [pooler.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      # Succeeded at 01:00, then never again.
      - series: 'pooler_last_success_timestamp_seconds{{{LABELS}}}'
        values: '3600x1800'
      # 20 of 1,010 calls failed: 2 %.
      - series: 'pooler_calls_total{{{LABELS},status="completed"}}'
        values: '990x1800'
      - series: 'pooler_calls_total{{{LABELS},status="failed"}}'
        values: '20x1800'
      - series: 'pooler_calls_total{{{LABELS},status="in_doubt"}}'
        values: '1x1800'
      # Another store: 5 of 1,000 failed, 0.5 %, and nothing in doubt.
      - series: 'pooler_calls_total{{pool="nightly.yaml",store="other",status="completed"}}'
        values: '995x1800'
      - series: 'pooler_calls_total{{pool="nightly.yaml",store="other",status="failed"}}'
        values: '5x1800'
      - series: 'pooler_calls_in_doubt{{{LABELS}}}'
        values: '1x1800'
      - series: 'pooler_run_in_progress{{{LABELS}}}'
        values: '0x1800'
    alert_rule_test:
      - eval_time: 26h
        alertname: NightlyImportNoSuccess
        exp_alerts: []
      - eval_time: 27h2m
        alertname: NightlyImportNoSuccess
        exp_alerts:
          - exp_labels: {{severity: page, pool: nightly.yaml, store: shop}}
            exp_annotations:
              summary: "nightly.yaml against shop has not succeeded for 26 hours"
      - eval_time: 2h
        alertname: NightlyImportFailedCalls
        exp_alerts:
          - exp_labels: {{severity: ticket, pool: nightly.yaml, store: shop}}
            exp_annotations:
              summary: "more than 1 % of the calls of nightly.yaml failed in its last run"
      - eval_time: 2h
        alertname: NightlyImportInDoubt
        exp_alerts:
          - exp_labels: {{severity: ticket, pool: nightly.yaml, store: shop}}
            exp_annotations:
              summary: "1 call(s) of nightly.yaml in doubt: check the store, then run the task again"
      - eval_time: 2h
        alertname: NightlyImportStuck
        exp_alerts: []
"""


def rules_of_the_docs() -> str:
    text = (ROOT / "docs" / "operations.md").read_text(encoding="utf-8")
    found = re.search(r"```yaml\n(# /etc/prometheus/rules/pooler\.yml\n.*?)```", text, re.S)
    assert found, "docs/operations.md shows no pooler.yml rule file"
    return found.group(1)


def test_the_documented_alert_rules_fire_when_promtool_says_they_should(tmp_path: Path) -> None:
    promtool = shutil.which("promtool")
    if promtool is None:
        why = ("promtool is not installed (apt-get install prometheus): the documented alert rules were "
               "not run")
        if os.environ.get(REQUIRE) == "1":
            pytest.fail(f"{REQUIRE}=1: {why}")
        pytest.skip(why)
    (tmp_path / "pooler.yml").write_text(rules_of_the_docs(), encoding="utf-8")
    (tmp_path / "tests.yml").write_text(TESTS, encoding="utf-8")
    checked = subprocess.run([promtool, "check", "rules", "pooler.yml"], cwd=tmp_path, capture_output=True,
                             text=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = subprocess.run([promtool, "test", "rules", "tests.yml"], cwd=tmp_path, capture_output=True,
                            text=True, timeout=60, check=False)
    assert tested.returncode == 0, tested.stdout + tested.stderr
