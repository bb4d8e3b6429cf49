"""``gpus``: the portal's command line, a thin client of its REST API (docs/cli.md).

It imports nothing from the portal (no Django): installed on a laptop, it needs only click and
requests, and talks to the portal at ``GPUS_URL`` with the token ``gpus login`` saved.
"""
