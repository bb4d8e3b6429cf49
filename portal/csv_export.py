"""CSV downloads of the queue, delivery and waits pages: ``?format=csv`` on the page's own URL.

Same filters as the page by construction (the page's view parses them, then hands over here), and
the same rows as the JSON API (each row is the API's own dict for it), so the three never disagree.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Mapping
from datetime import datetime

from django.http import HttpRequest, HttpResponse

from budgets.delivery import Delivery
from portal.api import serializers
from portal.metrics import WaitReport, meets_budget
from scheduling import reports
from scheduling.models import Cluster


def wants_csv(request: HttpRequest) -> bool:
    return request.GET.get("format") == "csv"


def csv_response(*, filename: str, header: list[str], rows: Iterable[Mapping[str, object]]) -> HttpResponse:
    """A download named ``filename``: one header line, then one line per row (missing keys empty)."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.DictWriter(response, fieldnames=header, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return response


def queue_csv(*, cluster: Cluster, filters: Mapping[str, str], now: datetime) -> HttpResponse:
    """The pending workloads in scheduling order, as the queue page lists them (its first QUEUE_LIMIT)."""
    rows = [
        serializers.queue_row_json(w, now=now) for w in reports.queue_rows(cluster=cluster, filters=filters)
    ]
    header = ["position", "id", "name", "allocation", "user", "gpus", "workload_class", "wait_s", "reason_code",
              "reason", "estimated_start"]  # fmt: skip
    return csv_response(filename=f"queue-{cluster.slug}.csv", header=header, rows=rows)


def delivery_csv(report: Delivery) -> HttpResponse:
    """The node itself, then its children (the page's table): delivered and owed GPU-hours over the period."""
    data = serializers.delivery_json(report)
    own = {"level": "node", "id": data["node"]["id"], "path": data["node"]["path"],
           "allocation_gpus": data["allocation_gpus"], "delivered_gpu_hours": data["delivered_gpu_hours"],
           "owed_gpu_hours": data["owed_gpu_hours"], "delivered_owed_ratio": data["delivered_owed_ratio"],
           "under_95pct": not meets_budget(report.delivered_gpu_h, report.owed_gpu_h)}  # fmt: skip
    children = [{"level": "child", **child} for child in data["children"]]
    header = ["level", "id", "path", "allocation_gpus", "delivered_gpu_hours", "owed_gpu_hours",
              "delivered_owed_ratio", "under_95pct"]  # fmt: skip
    name = f"delivery-{report.cluster.slug}-{report.node.path.replace('/', '_')}-{report.days}d.csv"
    return csv_response(filename=name, header=header, rows=[own, *children])


def waits_csv(*, cluster: Cluster, report: WaitReport, days: int) -> HttpResponse:
    """Wait p50 / p90 (seconds) and starts per workload class over the period, as the page's table."""
    rows = serializers.waits_json(report)["classes"]
    header = ["workload_class", "starts", "p50_s", "p90_s"]
    return csv_response(filename=f"waits-{cluster.slug}-{days}d.csv", header=header, rows=rows)
