"""``python -m gpus_cli``: the same as the ``gpus`` console script."""

from gpus_cli.main import run

run()
