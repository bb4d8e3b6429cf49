"""Which adapter serves a cluster, by its backend kind.

Adapters are built by factories ``(cluster, clock) -> Backend``. The simulated one is built in;
Slurm and Kubernetes are imported lazily from ``scheduling.backends.slurm`` / ``.kubernetes``,
which expose ``SlurmBackend.for_cluster(cluster)`` / ``KubernetesBackend.for_cluster(cluster)``
(or a module-level ``build(cluster)``, or register themselves with :func:`register_backend`).
Tests may register a factory for a kind to inject a fake.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable

from scheduling.backends.base import Backend
from scheduling.backends.simulated import SimulatedBackend
from scheduling.models import BackendKind, Cluster

BackendFactory = Callable[[Cluster, Callable[[], float]], Backend]

_factories: dict[str, BackendFactory] = {
    BackendKind.SIMULATED: lambda cluster, clock: SimulatedBackend(cluster, clock=clock),
}


def register_backend(kind: str, factory: BackendFactory) -> BackendFactory | None:
    """Serve ``kind`` with ``factory``; returns the factory it replaced (for tests to restore)."""
    previous = _factories.get(kind)
    _factories[kind] = factory
    return previous


def backend_for(cluster: Cluster, *, clock: Callable[[], float] = time.time) -> Backend:
    factory = _factories.get(cluster.backend_kind)
    if factory is not None:
        return factory(cluster, clock)
    module = importlib.import_module(f"scheduling.backends.{cluster.backend_kind}")
    if hasattr(module, "build"):
        return module.build(cluster)
    adapter = getattr(module, f"{cluster.backend_kind.title()}Backend")
    return adapter.for_cluster(cluster)
