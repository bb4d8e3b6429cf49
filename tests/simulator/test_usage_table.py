"""The usage tables the engine reads each pass give exactly what ``values`` gives, in key order."""

from __future__ import annotations

import random
import struct

import pytest

from scheduling.simulator.usage import DecayedUsage, WindowedUsage


def _bits(values: dict) -> list[tuple[object, bytes]]:
    """Keys in order with each value's bits (so 0.0 and -0.0, or a last digit, differ)."""
    return [(key, struct.pack("<d", value)) for key, value in values.items()]


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("kind", ["windowed", "decayed"])
def test_a_table_reads_what_values_reads_pass_after_pass(seed, kind):
    """Keys come and go, rates change at odd moments, reads land in closed hours, the open hour,
    before the window starts and long after work stopped: every read is bit for bit ``values``."""
    rng = random.Random(seed)
    usage = WindowedUsage(window_s=5 * 3600.0) if kind == "windowed" else DecayedUsage(3000.0)
    table = usage.table()
    keys = [("lab/a", "ann"), ("lab/a", "bob"), ("lab/b", "cy"), ("lab/b", "dee"), ("lab/c", "eve")]
    order: dict[tuple[str, str], None] = {}  # what the table should hold, in order
    now = 0.0
    for _ in range(1500):
        now += rng.choice([0.0, 10.0, 10.0, 10.0, 250.0, 3599.9, 3600.0, 20_000.0]) * rng.random()
        for _ in range(rng.choice([0, 0, 1, 2])):
            key = rng.choice(keys)
            if key in order and rng.random() < 0.5:
                table.remove(key)
                del order[key]
            elif key not in order:
                table.add(key)
                order[key] = None
        if rng.random() < 0.3:
            usage.set_rate(rng.choice(keys), now, rng.choice([0, 0, 0, 1, 8, 24]))
        assert _bits(table.read(now)) == _bits(usage.values(order, now))


def test_a_table_keeps_the_order_keys_were_added_in():
    usage = WindowedUsage(window_s=3600.0)
    table = usage.table()
    for key in ("c", "a", "b"):
        table.add(key)
    usage.set_rate("a", 0.0, 4)
    table.remove("c")
    table.add("c")

    assert list(table.read(100.0)) == ["a", "b", "c"]
    assert table.read(100.0)["a"] == 400.0
    with pytest.raises(ValueError):
        table.add("a")


def test_a_key_that_ran_stays_fixed_only_while_the_window_start_stays_in_its_hour():
    """Work that stopped: read at the same value while its hours leave the window one by one."""
    usage = WindowedUsage(window_s=7200.0)
    table = usage.table()
    table.add("nlp")
    usage.set_rate("nlp", 0.0, 4)
    usage.set_rate("nlp", 3600.0, 0)  # 4 GPUs for the first hour only
    for now in (3600.0, 7200.0, 8000.0, 9000.0, 10_799.0, 10_800.0, 12_000.0):
        assert _bits(table.read(now)) == _bits(usage.values(["nlp"], now))
