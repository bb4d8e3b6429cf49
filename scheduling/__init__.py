"""Scheduling: the Django app, the pure policy package and the simulator."""
