"""docs/alerts.yml: parsed, every metric it names defined by rechunk.live.metrics, each alert
documented in docs/runbook.md, checked by ``promtool check rules`` and its behaviour run by
``promtool test rules`` on synthetic series (when Debian's prometheus package is installed:
``apt-get install prometheus`` puts promtool on PATH)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parent.parent
ALERTS = ROOT / "docs" / "alerts.yml"
RUNBOOK = ROOT / "docs" / "runbook.md"
PROMTOOL = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(
    PROMTOOL is None,
    reason="promtool is not on PATH (apt-get install prometheus); the YAML checks still ran",
)

_SUFFIXES = {
    "counter": ("_total", "_created"),
    "histogram": ("_bucket", "_sum", "_count", "_created"),
    "gauge": ("",),
}


def rules() -> list[dict[str, Any]]:
    data = yaml.safe_load(ALERTS.read_text(encoding="utf-8"))
    return [rule for group in data["groups"] for rule in group["rules"]]


def defined_series() -> set[str]:
    """Every series name a LiveMetrics registry exposes, from the real prometheus_client."""
    pytest.importorskip("prometheus_client")
    from rechunk.live.metrics import LiveMetrics

    names = set()
    for family in LiveMetrics().registry.collect():
        names |= {family.name + suffix for suffix in _SUFFIXES[family.type]}
    return names


def named_metrics(text: str) -> set[str]:
    return set(re.findall(r"\brechunk_[a-z_]+\b", text))


def test_rules_name_only_defined_metrics() -> None:
    defined = defined_series()
    assert "rechunk_documents_accepted_total" in defined  # the counters' exposition names
    seen: set[str] = set()
    for rule in rules():
        texts = [rule["expr"], *rule.get("annotations", {}).values()]
        names = set().union(*(named_metrics(t) for t in texts))
        assert names, rule["alert"]
        assert names <= defined, (rule["alert"], names - defined)
        seen |= names
    # the freshness gauges the pages rest on are all used
    assert {"rechunk_oldest_unretrievable_age_seconds", "rechunk_queue_oldest_age_seconds",
            "rechunk_stale_retrievable_revisions"} <= seen


def test_pages_and_tickets() -> None:
    by_name = {rule["alert"]: rule for rule in rules()}
    assert all(rule["labels"]["severity"] in ("page", "ticket") for rule in by_name.values())
    page = by_name["RechunkRevisionNotRetrievable"]
    assert page["labels"]["severity"] == "page"
    assert "rechunk_oldest_unretrievable_age_seconds" in page["expr"]
    notes = " ".join(page["annotations"].values())
    assert "rechunk_queue_oldest_age_seconds" in notes  # queue age attached
    assert "rechunk_reindexed_bytes_per_changed_byte" in notes  # amplification attached
    for name, rule in by_name.items():
        if "rechunk_reindexed_bytes_per_changed_byte" in rule["expr"]:
            assert rule["labels"]["severity"] == "ticket", name  # amplification: never a page
        if "rechunk_stale_retrievable_revisions" in rule["expr"]:
            assert rule["labels"]["severity"] == "ticket", name  # duplicate growth
    assert {"RechunkAmplificationHigh", "RechunkDuplicateGrowth"} <= set(by_name)


def test_runbook_covers_every_alert_and_metric() -> None:
    runbook = RUNBOOK.read_text(encoding="utf-8")
    headings = set(re.findall(r"^### (\w+)$", runbook, re.M))
    for rule in rules():
        assert rule["alert"] in headings, rule["alert"]
        anchor = rule["annotations"]["runbook"].split("#")[1]
        assert anchor == rule["alert"].lower()
    pytest.importorskip("prometheus_client")
    from rechunk.live.metrics import LiveMetrics

    for family in LiveMetrics().registry.collect():
        shown = family.name + ("_total" if family.type == "counter" else "")
        assert f"`{shown}" in runbook, shown


@needs_promtool
def test_promtool_checks_the_rules() -> None:
    done = subprocess.run([str(PROMTOOL), "check", "rules", str(ALERTS)],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules())} rules found" in done.stdout


# synthetic series, one sample a minute; the expected values are worked out by hand
UNIT_TESTS = """
rule_files: [{alerts}]
evaluation_interval: 1m
tests:
  # a revision pending from minute 1: its age passes 300 s at minute 7 (360 s), the page
  # fires 2 minutes later; the edits' amplification all falls in the (10, 20] bucket, so
  # the page's annotation gives its p95 as 10 + 0.95 * 10 = 19.5
  - interval: 1m
    input_series:
      - series: 'rechunk_oldest_unretrievable_age_seconds{{job="rechunk",instance="w1"}}'
        values: '0 0 60+60x20'
      - series: 'rechunk_unretrievable_revisions{{job="rechunk",instance="w1"}}'
        values: '2x22'
      - series: 'rechunk_queue_depth{{job="rechunk",instance="w1"}}'
        values: '1x22'
      - series: 'rechunk_queue_oldest_age_seconds{{job="rechunk",instance="w1"}}'
        values: '45x22'
      - series: 'rechunk_reindexed_bytes_per_changed_byte_bucket{{job="rechunk",instance="w1",source_type="markdown",policy="structured-1",le="10.0"}}'
        values: '0x22'
      - series: 'rechunk_reindexed_bytes_per_changed_byte_bucket{{job="rechunk",instance="w1",source_type="markdown",policy="structured-1",le="20.0"}}'
        values: '0+1x22'
      - series: 'rechunk_reindexed_bytes_per_changed_byte_bucket{{job="rechunk",instance="w1",source_type="markdown",policy="structured-1",le="+Inf"}}'
        values: '0+1x22'
    alert_rule_test:
      - eval_time: 8m
        alertname: RechunkRevisionNotRetrievable
        exp_alerts: []
      - eval_time: 10m
        alertname: RechunkRevisionNotRetrievable
        exp_alerts:
          - exp_labels: {{severity: page, job: rechunk, instance: w1}}
            exp_annotations:
              summary: "A saved revision has not been retrievable for 9m 0s on w1"
              pending_revisions: "2"
              queue_depth: "1"
              queue_oldest_age: "45s"
              amplification_p95_1h: "19.5"
              runbook: "docs/runbook.md#rechunkrevisionnotretrievable"
      - eval_time: 10m
        alertname: RechunkQueueStuck
        exp_alerts: []
      - eval_time: 10m
        alertname: RechunkWatcherAbsent
        exp_alerts: []
      - eval_time: 20m
        alertname: RechunkAmplificationHigh
        exp_alerts: []
  # every edit of one policy re-embeds 4-6 inputs (median 5), where an edit in one place
  # needs one or two: a ticket after an hour, and no page, since every revision is
  # retrievable
  - interval: 1m
    input_series:
      - series: 'rechunk_oldest_unretrievable_age_seconds{{job="rechunk",instance="w2"}}'
        values: '0x80'
      - series: 'rechunk_queue_oldest_age_seconds{{job="rechunk",instance="w2"}}'
        values: '0x80'
      - series: 'rechunk_queue_depth{{job="rechunk",instance="w2"}}'
        values: '0x80'
      - series: 'rechunk_inputs_embedded_per_changed_document_bucket{{job="rechunk",instance="w2",source_type="pdf",policy="fixed-2",le="4.0"}}'
        values: '0x80'
      - series: 'rechunk_inputs_embedded_per_changed_document_bucket{{job="rechunk",instance="w2",source_type="pdf",policy="fixed-2",le="6.0"}}'
        values: '0+2x80'
      - series: 'rechunk_inputs_embedded_per_changed_document_bucket{{job="rechunk",instance="w2",source_type="pdf",policy="fixed-2",le="+Inf"}}'
        values: '0+2x80'
    alert_rule_test:
      - eval_time: 50m
        alertname: RechunkAmplificationHigh
        exp_alerts: []
      - eval_time: 75m
        alertname: RechunkAmplificationHigh
        exp_alerts:
          - exp_labels: {{severity: ticket, job: rechunk, instance: w2, source_type: pdf, policy: fixed-2}}
            exp_annotations:
              summary: "Median edit of pdf under fixed-2 re-embeds 5.0 inputs"
              runbook: "docs/runbook.md#rechunkamplificationhigh"
      - eval_time: 75m
        alertname: RechunkRevisionNotRetrievable
        exp_alerts: []
  # stale revisions piling up, one more a minute (41 at minute 40): a ticket after 30m
  - interval: 1m
    input_series:
      - series: 'rechunk_stale_retrievable_revisions{{job="rechunk",instance="w3"}}'
        values: '1+1x60'
      - series: 'rechunk_queue_depth{{job="rechunk",instance="w3"}}'
        values: '0x60'
    alert_rule_test:
      - eval_time: 20m
        alertname: RechunkDuplicateGrowth
        exp_alerts: []
      - eval_time: 40m
        alertname: RechunkDuplicateGrowth
        exp_alerts:
          - exp_labels: {{severity: ticket, job: rechunk, instance: w3}}
            exp_annotations:
              summary: "41 document(s) on w3 still answer with an earlier revision, and the count is growing"
              runbook: "docs/runbook.md#rechunkduplicategrowth"
  # one file given up on: its failure counter appears at 1 (no earlier sample for
  # increase() to count from), a ticket 15 minutes later
  - interval: 1m
    input_series:
      - series: 'rechunk_documents_failed_total{{job="rechunk",instance="w4",source_type="pdf",policy="structured-1"}}'
        values: '_x5 1x40'
      - series: 'rechunk_queue_depth{{job="rechunk",instance="w4"}}'
        values: '0x45'
    alert_rule_test:
      - eval_time: 15m
        alertname: RechunkDocumentsFailing
        exp_alerts: []
      - eval_time: 25m
        alertname: RechunkDocumentsFailing
        exp_alerts:
          - exp_labels: {{severity: ticket, job: rechunk, instance: w4, source_type: pdf, policy: structured-1}}
            exp_annotations:
              summary: "1 pdf revision(s) given up on in the last hour"
              runbook: "docs/runbook.md#rechunkdocumentsfailing"
  # no watcher scraped at all
  - interval: 1m
    input_series:
      - series: 'node_load1{{instance="elsewhere"}}'
        values: '1x10'
    alert_rule_test:
      - eval_time: 3m
        alertname: RechunkWatcherAbsent
        exp_alerts: []
      - eval_time: 6m
        alertname: RechunkWatcherAbsent
        exp_alerts:
          - exp_labels: {{severity: page}}
            exp_annotations:
              summary: "No rechunk watcher is being scraped: nothing tracks freshness"
              runbook: "docs/runbook.md#rechunkwatcherabsent"
"""


@needs_promtool
def test_promtool_runs_the_alerts(tmp_path: Path) -> None:
    tests = tmp_path / "alerts_test.yml"
    tests.write_text(UNIT_TESTS.format(alerts=ALERTS), encoding="utf-8")
    done = subprocess.run([str(PROMTOOL), "test", "rules", str(tests)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
