"""Writes for the live scheduler: every change to workloads, runs and rollups goes through here.

Services are ``<entity>_<verb>(*, ...)`` functions that run in a transaction and refuse illegal
moves. The scheduling pass itself is :func:`scheduling.passes.run_pass`.
"""

from scheduling.services.renewals import RenewalRefused, Renewed, workload_renew_protection
from scheduling.services.runs import run_close, run_open
from scheduling.services.workloads import (
    IllegalTransition,
    SubmissionRefused,
    SubmitResult,
    workload_adopt,
    workload_cancel,
    workload_hold,
    workload_release,
    workload_resubmit,
    workload_submit,
    workload_transition,
)

__all__ = [
    "IllegalTransition",
    "RenewalRefused",
    "Renewed",
    "SubmissionRefused",
    "SubmitResult",
    "run_close",
    "run_open",
    "workload_adopt",
    "workload_cancel",
    "workload_hold",
    "workload_release",
    "workload_renew_protection",
    "workload_resubmit",
    "workload_submit",
    "workload_transition",
]
