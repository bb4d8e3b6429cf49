"""Scheduling: the Django app, the pure policy package and the simulator.

Importing it puts the compiled policy and simulator modules, where built and current, ahead of
their source files (:mod:`scheduling.compiled`).
"""

from scheduling.compiled import install

install()
