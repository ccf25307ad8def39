"""docs/grafana/pgcdc-dashboard.json: valid JSON Grafana imports, and every metric its panels
query is one the producer (connector/metrics.py) or the merge job (spark_jobs/runtime/metrics.py)
exports: a renamed metric fails here, not on an operator's empty panel."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY

import connector.metrics  # noqa: F401 - registers the producer's metrics
import spark_jobs.runtime.metrics  # noqa: F401 - registers the merge job's metrics

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "pgcdc-dashboard.json"


def _exported() -> set[str]:
    names = set()
    suffixes = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"),
                "gauge": ("",)}
    for metric in REGISTRY.collect():  # labelled metrics have no sample until first used
        names.update(metric.name + s for s in suffixes.get(metric.type, ("",)))
    return names


def test_every_queried_metric_is_exported() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    queried = {m for e in exprs for m in re.findall(r"\bpgcdc_[a-z_]+", e)}
    assert queried, "no panel queries a pgcdc metric"
    assert queried <= _exported(), sorted(queried - _exported())
    # both programs are on it
    assert any(m.startswith("pgcdc_merge_") for m in queried)
    assert any(not m.startswith("pgcdc_merge_") for m in queried)
