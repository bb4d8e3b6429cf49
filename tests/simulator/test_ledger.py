"""The ledger's per-allocation integrals, added late in C loops, are bit for bit one addition per
allocation and interval (where there is demand, where work runs), as a plain loop makes them."""

from __future__ import annotations

import random
import struct

import pytest

from scheduling.simulator.metrics import Ledger


def _bits(value: float) -> bytes:
    return struct.pack("<d", value)


@pytest.mark.parametrize("read_every_step", [True, False])
@pytest.mark.parametrize("seed", range(4))
def test_owed_and_delivered_are_the_plain_loops_sums(seed, read_every_step):
    """Read after every step, or only at the end (the lines then add many intervals late)."""
    rng = random.Random(seed)
    paths = ["lab/a", "lab/b", "lab/c", "lab/d", "other"]
    fractions = {"lab/a": 0.3, "lab/b": 0.25, "lab/c": 0.1, "lab/d": 1 / 3}  # "other": 0.0
    ledger = Ledger(64, measure_from=500.0, horizon=90_000.0, fractions=fractions, healthy_gpus=64)
    plain = {path: [0, 0, 0.0, 0.0] for path in paths}  # demand, running, owed, delivered
    last, now = 0.0, 0.0
    for _ in range(2000):
        now += rng.choice([0.0, 1.0, 10.0, 333.3, 3600.0]) * rng.random()
        ledger.accrue(now)
        start, end = max(last, 500.0), min(now, 90_000.0)
        last = max(last, now)
        if end > start:
            for path, numbers in plain.items():
                if numbers[0]:
                    fraction = fractions.get(path, 0.0)
                    numbers[2] += min(fraction * ledger.healthy_gpus, numbers[0]) * (end - start)
                if numbers[1]:
                    numbers[3] += numbers[1] * (end - start)
        change = rng.random()
        if change < 0.1:
            ledger.healthy_gpus = rng.choice([56, 60, 64])
        else:
            path = rng.choice(paths)
            gpus = rng.choice([1, 2, 8])
            line, numbers = ledger.allocation(path), plain[path]
            if change < 0.5:
                line.demand += gpus
                numbers[0] += gpus
            elif numbers[0] >= gpus and change < 0.7:
                line.demand -= gpus
                numbers[0] -= gpus
                numbers[1] = min(numbers[1], numbers[0])
                line.running = numbers[1]
            elif numbers[1] + gpus <= numbers[0]:
                line.running += gpus
                numbers[1] += gpus
            elif numbers[1] >= gpus:
                line.running -= gpus
                numbers[1] -= gpus
        if read_every_step:
            _check(ledger, plain)
    _check(ledger, plain)


def _check(ledger: Ledger, plain: dict[str, list]) -> None:
    for path in ledger.allocations:
        line, numbers = ledger.allocations[path], plain[path]
        assert (line.demand, line.running) == (numbers[0], numbers[1])
        assert _bits(line.owed_s) == _bits(numbers[2]), path
        assert _bits(line.delivered_s) == _bits(numbers[3]), path
