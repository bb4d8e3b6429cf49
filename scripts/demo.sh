#!/usr/bin/env bash
# The demo: embedded SQLite under var/, the demo organisation, the portal on http://127.0.0.1:8000.
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-true}"
unset DATABASE_URL REDIS_URL CELERY_BROKER_URL || true
PY=.venv/bin/python
mkdir -p var
echo "==> Migrating the embedded database (var/portal.sqlite3)"
$PY manage.py migrate --noinput -v 0
echo "==> Loading the demo organisation"
$PY manage.py load_demo
echo "==> Serving the portal at http://127.0.0.1:${PORT:-8000}  (Ctrl-C stops it)"
exec $PY manage.py runserver "127.0.0.1:${PORT:-8000}"
