"""An Ai2-like lab, generated from a seed (DESIGN 1; the numbers Ai2 published).

The lab: 1,000 GPUs (125 nodes x 8, in topology domains of 25 nodes), 15 teams in five programs
whose budgets add up to ~82% of the cluster, 150 researchers, and a work mix:

| kind        | GPUs         | runtime                  | contract                                            |
|-------------|--------------|--------------------------|-----------------------------------------------------|
| debug       | 1-2          | 5-45 min (median 10)     | min runtime = whole run, not resumable, max 1 h     |
| interactive | 1-8          | 2-10 h                   | min runtime = session (capped by policy), idle 50-85% of the time |
| sweep       | 1 (x 8-48)   | 0.5-12 h (median 3)      | min runtime 30 min, half resumable                  |
| batch       | 8-64 (nodes) | 1-72 h (median 10)       | resumable, checkpoints every 30-60 min, min runtime 1-4 h |
| unfunded    | 1-8          | 1-48 h (median 6)        | charged to a 0-budget allocation; given up after 24 h unstarted |

Volume: funded work offers ``funded_load`` x capacity GPU-hours per hour on average, split over
teams by an *appetite* drawn per team (some teams want far more than their budget, some less),
and unfunded work ``unfunded_load`` more. Each team has its own weekly cycle (amplitude
``seasonality``, random phase) on top of quieter weekends; debug and interactive work follow the
working day too. With a total offered load near capacity, the queue builds during the week and
drains at weekends, so requested GPUs (running + pending) sit at 2-3x capacity.

Priorities (read only by the old "priority" policy) model inflation: ``high_priority_share`` of
all work says "high" (3; Ai2 saw 100%), the rest "normal" (2) or rarely "low" (1).
Node failures: each node fails as a Poisson process (``node_mtbf_days``) and is repaired after a
log-normal time (median ``repair_median_h``). The first ``warmup_days`` fill the cluster and the
usage window and are not measured.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace

from scheduling.policy import BudgetNodeSpec, ClusterNodeSpec
from scheduling.simulator.model import NodeOutage, SimJob, SimulationInput

HOUR, DAY, WEEK = 3600.0, 86400.0, 7 * 86400.0
PROGRAMS = {
    "olmo": ("pretraining", "midtraining", "posttraining", "data"),
    "prior": ("embodied", "multimodal", "perception"),
    "nlp": ("reasoning", "mosaic", "aristo", "safety"),
    "s2": ("search", "reader"),
    "climate": ("weather", "skylight"),
}
UNFUNDED = "ai2/opportunistic"
Density = Callable[[float], float]


@dataclass(frozen=True)
class Ai2Parameters:
    """Every knob of the generator; the defaults describe the lab above."""

    days: float = 30.0
    seed: int = 1
    nodes: int = 125
    gpus_per_node: int = 8
    nodes_per_domain: int = 25
    gpu_type: str = "H100"
    teams: int = 15
    researchers: int = 150
    allocated_share: float = 0.82
    funded_load: float = 0.82
    unfunded_load: float = 0.4
    weekend_factor: float = 0.55
    seasonality: float = 0.5
    debug_per_researcher_day: float = 1.5
    interactive_per_researcher_week: float = 1.0
    sweeps_per_team_week: float = 6.0
    unfunded_patience_h: float = 24.0
    node_mtbf_days: float = 60.0
    repair_median_h: float = 6.0
    warmup_days: float = 3.0
    high_priority_share: float = 0.95


@dataclass(frozen=True)
class Team:
    path: str
    budget: float
    appetite: float  # offered funded GPU-hours per hour, on average
    phase: float  # where in the week its peak falls, 0-1
    users: tuple[str, ...]


def ai2_scenario(parameters: Ai2Parameters | None = None) -> SimulationInput:
    """Generate the whole replayable input; the same parameters always give the same input."""
    p = parameters or Ai2Parameters()
    rng = random.Random(p.seed)
    horizon = (p.warmup_days + p.days) * DAY
    teams = _teams(rng, p)
    nodes = _cluster(p)
    specs = _jobs(rng, p, teams, horizon)
    jobs = tuple(_numbered(specs))
    return SimulationInput(
        name="ai2",
        cluster_nodes=nodes,
        tree=_tree(teams),
        jobs=jobs,
        days=p.days,
        warmup_s=p.warmup_days * DAY,
        outages=_outages(
            random.Random(f"{p.seed}-outages"), p, nodes, horizon
        ),  # same failures whatever the work
        parameters={"scenario": "ai2", **asdict(p)},
    )


# -- the lab ------------------------------------------------------------------------------------


def _cluster(p: Ai2Parameters) -> tuple[ClusterNodeSpec, ...]:
    domain_size = max(1, p.nodes_per_domain)
    return tuple(
        ClusterNodeSpec(
            f"node-{index:04d}", p.gpus_per_node, p.gpu_type, f"domain-{index // domain_size:02d}"
        )
        for index in range(p.nodes)
    )


def _team_paths(count: int) -> list[str]:
    named = [f"ai2/{program}/{team}" for program, teams in PROGRAMS.items() for team in teams]
    programs = list(PROGRAMS)
    return [named[i] if i < len(named) else f"ai2/{programs[i % 5]}/team-{i:02d}" for i in range(count)]


def _teams(rng: random.Random, p: Ai2Parameters) -> list[Team]:
    paths = _team_paths(p.teams)
    weights = [rng.lognormvariate(0.0, 0.6) for _ in paths]
    allocated = p.allocated_share * p.nodes * p.gpus_per_node
    budgets = [max(4.0, round(allocated * weight / sum(weights))) for weight in weights]
    appetites = [budget * rng.lognormvariate(0.0, 0.35) for budget in budgets]
    scale = p.funded_load * p.nodes * p.gpus_per_node / sum(appetites)
    users = _researchers(p.researchers, budgets)
    return [
        Team(path, budget, appetite * scale, rng.random(), tuple(members))
        for path, budget, appetite, members in zip(paths, budgets, appetites, users, strict=True)
    ]


def _researchers(count: int, budgets: list[float]) -> list[list[str]]:
    """Researchers per team in proportion to budget (at least 3), named u000, u001, ..."""
    sizes = [max(3, round(count * budget / sum(budgets))) for budget in budgets]
    names, first = [], 0
    for size in sizes:
        names.append([f"u{index:03d}" for index in range(first, first + size)])
        first += size
    return names


def _tree(teams: list[Team]) -> tuple[BudgetNodeSpec, ...]:
    programs: dict[str, float] = {}
    for team in teams:
        program = team.path.rsplit("/", 1)[0]
        programs[program] = programs.get(program, 0.0) + team.budget
    return (
        BudgetNodeSpec("ai2", None, sum(programs.values())),
        *(BudgetNodeSpec(path, "ai2", budget) for path, budget in programs.items()),
        BudgetNodeSpec(UNFUNDED, "ai2", 0.0),
        *(BudgetNodeSpec(team.path, team.path.rsplit("/", 1)[0], team.budget) for team in teams),
    )


# -- when work arrives --------------------------------------------------------------------------


def _weekly(p: Ai2Parameters, phase: float) -> Density:
    """Relative arrival rate: quieter weekends times the team's own weekly cycle (mean ~1)."""

    def density(moment: float) -> float:
        weekend = (moment % WEEK) >= 5 * DAY
        cycle = 1.0 + p.seasonality * math.cos(2 * math.pi * ((moment % WEEK) / WEEK - phase))
        return (p.weekend_factor if weekend else 1.0) * cycle

    return density


def _working_day(density: Density) -> Density:
    return lambda moment: (
        density(moment) * (1.0 + 0.7 * math.cos(2 * math.pi * ((moment % DAY) / DAY - 14 / 24)))
    )


def _arrivals(rng: random.Random, count: int, density: Density, horizon: float) -> list[float]:
    """``count`` arrival times in ``[0, horizon)`` distributed like ``density`` (by rejection)."""
    ceiling = max(density(step * horizon / 2000) for step in range(2000)) * 1.05
    times: list[float] = []
    while len(times) < count:
        moment = rng.uniform(0.0, horizon)
        if rng.random() * ceiling < density(moment):
            times.append(round(moment, 1))
    return sorted(times)


def _poisson_count(rng: random.Random, mean: float) -> int:
    """A Poisson draw (normal approximation above 50, exact below)."""
    if mean > 50:
        return max(0, round(rng.gauss(mean, math.sqrt(mean))))
    count, limit, product = 0, math.exp(-mean), rng.random()
    while product > limit:
        count, product = count + 1, product * rng.random()
    return count


# -- the work mix -------------------------------------------------------------------------------


def _jobs(rng: random.Random, p: Ai2Parameters, teams: list[Team], horizon: float) -> list[SimJob]:
    jobs: list[SimJob] = []
    for team in teams:
        weekly = _weekly(p, team.phase)
        jobs += _debug(rng, p, team, _working_day(weekly), horizon)
        jobs += _interactive(rng, p, team, _working_day(weekly), horizon)
        jobs += _sweeps(rng, p, team, weekly, horizon)
        offered = team.appetite * horizon - sum(
            job.gpus * job.duration_s for job in jobs if job.allocation == team.path
        )
        jobs += _batch(rng, p, team, weekly, horizon, offered)
    jobs += _unfunded(rng, p, teams, horizon)
    return jobs


def _debug(
    rng: random.Random, p: Ai2Parameters, team: Team, density: Density, horizon: float
) -> list[SimJob]:
    count = _poisson_count(rng, len(team.users) * p.debug_per_researcher_day * horizon / DAY)
    jobs = []
    for moment in _arrivals(rng, count, density, horizon):
        duration = _clipped_lognormal(rng, 10 * 60, 0.6, 5 * 60, 45 * 60)
        jobs.append(
            SimJob(
                id=0,
                allocation=team.path,
                user=rng.choice(team.users),
                gpus=rng.choice((1, 1, 1, 2, 2)),
                submit_s=moment,
                duration_s=duration,
                workload_class="debug",
                min_runtime_s=duration,
                max_runtime_s=HOUR,
                priority=_inflated(rng, p.high_priority_share),
                busy=0.6,
                kind="debug",
            )
        )
    return jobs


def _interactive(
    rng: random.Random, p: Ai2Parameters, team: Team, density: Density, horizon: float
) -> list[SimJob]:
    count = _poisson_count(rng, len(team.users) * p.interactive_per_researcher_week * horizon / WEEK)
    jobs = []
    for moment in _arrivals(rng, count, density, horizon):
        duration = rng.uniform(2 * HOUR, 10 * HOUR)
        jobs.append(
            SimJob(
                id=0,
                allocation=team.path,
                user=rng.choice(team.users),
                gpus=rng.choice((1, 1, 1, 1, 2, 2, 2, 4, 4, 8)),
                submit_s=moment,
                duration_s=duration,
                workload_class="interactive",
                min_runtime_s=duration,
                max_runtime_s=math.ceil(duration / HOUR) * HOUR,
                priority=_inflated(rng, p.high_priority_share),
                busy=rng.uniform(0.15, 0.5),
                kind="interactive",
            )
        )
    return jobs


def _sweeps(
    rng: random.Random, p: Ai2Parameters, team: Team, density: Density, horizon: float
) -> list[SimJob]:
    count = _poisson_count(rng, p.sweeps_per_team_week * horizon / WEEK)
    jobs = []
    for moment in _arrivals(rng, count, density, horizon):
        user, resumable, priority = (
            rng.choice(team.users),
            rng.random() < 0.5,
            _inflated(rng, p.high_priority_share),
        )
        for member in range(rng.randint(8, 48)):
            duration = _clipped_lognormal(rng, 3 * HOUR, 0.6, 0.5 * HOUR, 12 * HOUR)
            jobs.append(
                SimJob(
                    id=0,
                    allocation=team.path,
                    user=user,
                    gpus=1,
                    submit_s=moment + member * 0.1,
                    duration_s=duration,
                    min_runtime_s=0.5 * HOUR,
                    resumable=resumable,
                    max_runtime_s=math.ceil(2 * duration / HOUR) * HOUR,
                    checkpoint_s=1800.0 if resumable else 0.0,
                    priority=priority,
                    busy=0.9,
                    kind="sweep",
                )
            )
    return jobs


def _batch(
    rng: random.Random, p: Ai2Parameters, team: Team, density: Density, horizon: float, offered_gpu_s: float
) -> list[SimJob]:
    """Training runs until the team's offered GPU-hours are used up."""
    shapes = []
    while offered_gpu_s > 0:
        gpus = rng.choice((8, 8, 8, 8, 8, 8, 8, 16, 16, 16, 16, 16, 32, 32, 32, 32, 64, 64, 64, 64))
        duration = _clipped_lognormal(rng, 10 * HOUR, 0.9, HOUR, 72 * HOUR)
        shapes.append((gpus, duration))
        offered_gpu_s -= gpus * duration
    jobs = []
    for moment, (gpus, duration) in zip(_arrivals(rng, len(shapes), density, horizon), shapes, strict=True):
        declared = rng.random() < 0.5
        jobs.append(
            SimJob(
                id=0,
                allocation=team.path,
                user=rng.choice(team.users),
                gpus=gpus,
                submit_s=moment,
                duration_s=duration,
                min_runtime_s=rng.choice((1, 2, 3, 4)) * HOUR,
                resumable=True,
                max_runtime_s=math.ceil(duration * rng.uniform(1.2, 2.0) / HOUR) * HOUR if declared else None,
                checkpoint_s=rng.choice((1800.0, 3600.0)),
                priority=_inflated(rng, p.high_priority_share),
                busy=rng.uniform(0.8, 0.98),
                kind="batch",
            )
        )
    return jobs


def _unfunded(rng: random.Random, p: Ai2Parameters, teams: list[Team], horizon: float) -> list[SimJob]:
    """Opportunistic work charged to no budget: evals, data processing, exploration."""
    offered = p.unfunded_load * p.nodes * p.gpus_per_node * horizon
    users = [user for team in teams for user in team.users]
    shapes = []
    while offered > 0:
        gpus = rng.choice((1, 1, 1, 2, 2, 4, 4, 4, 8, 8))
        duration = _clipped_lognormal(rng, 6 * HOUR, 0.8, HOUR, 48 * HOUR)
        shapes.append((gpus, duration))
        offered -= gpus * duration
    return [
        SimJob(
            id=0,
            allocation=UNFUNDED,
            user=rng.choice(users),
            gpus=gpus,
            submit_s=moment,
            duration_s=duration,
            resumable=True,
            checkpoint_s=1800.0,
            priority=_inflated(rng, p.high_priority_share),
            busy=rng.uniform(0.6, 0.95),
            kind="unfunded",
            patience_s=p.unfunded_patience_h * HOUR,
        )
        for moment, (gpus, duration) in zip(
            _arrivals(rng, len(shapes), lambda _: 1.0, horizon), shapes, strict=True
        )
    ]


def _inflated(rng: random.Random, high: float) -> int:
    """Priority as people set it when everybody can: 3 (high) mostly, else 2, rarely 1."""
    draw = rng.random()
    return 3 if draw < high else (2 if draw < high + (1 - high) * 0.7 else 1)


def _clipped_lognormal(rng: random.Random, median: float, sigma: float, low: float, high: float) -> float:
    return round(min(high, max(low, rng.lognormvariate(math.log(median), sigma))), 1)


def _numbered(jobs: list[SimJob]) -> list[SimJob]:
    """Ids in submit order (ties keep generation order), so ids read like a real queue's."""
    ordered = sorted(enumerate(jobs), key=lambda pair: (pair[1].submit_s, pair[0]))
    return [_with_id(job, number + 1) for number, (_, job) in enumerate(ordered)]


def _with_id(job: SimJob, number: int) -> SimJob:
    return replace(job, id=number, ref=f"{job.kind}-{number}")


# -- failures -----------------------------------------------------------------------------------


def _outages(
    rng: random.Random, p: Ai2Parameters, nodes: tuple[ClusterNodeSpec, ...], horizon: float
) -> tuple[NodeOutage, ...]:
    return node_outages(rng, [node.name for node in nodes], horizon, p.node_mtbf_days, p.repair_median_h)


def node_outages(
    rng: random.Random, names: list[str], horizon: float, mtbf_days: float, repair_median_h: float
) -> tuple[NodeOutage, ...]:
    """Per node, failures at exponential intervals (mean ``mtbf_days``), never overlapping a repair."""
    outages = []
    if mtbf_days <= 0:
        return ()
    for name in names:
        moment = rng.expovariate(1.0 / (mtbf_days * DAY))
        while moment < horizon:
            repair = _clipped_lognormal(rng, repair_median_h * HOUR, 0.8, 0.5 * HOUR, 7 * DAY)
            outages.append(NodeOutage(name, round(moment, 1), repair))
            moment += repair + rng.expovariate(1.0 / (mtbf_days * DAY))
    return tuple(sorted(outages, key=lambda outage: (outage.at_s, outage.node)))
