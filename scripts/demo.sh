#!/usr/bin/env bash
# The demo: embedded SQLite under var/, the demo organisation, the portal on http://127.0.0.1:8000,
# and the live scheduler: a Celery worker and beat on the embedded filesystem broker (var/broker/)
# running a pass per simulated cluster every SCHEDULING_PASS_INTERVAL_S seconds, plus demo traffic
# (manage.py demo_traffic, DEMO_SPEED simulated seconds per real second), a second worker for what-if
# replays, and notifications by e-mail on the console backend (DEBUG). Ctrl-C stops all of them.
# DEMO_HISTORY=0 skips backfilling 30 days of history into the rollups (15-25 s the first time on a busy 2-core machine,
# 2 s after: manage.py load_demo_history only fills hours before the first one it has).
set -euo pipefail
cd "$(dirname "$0")/.."
export DEBUG="${DEBUG:-true}"
unset DATABASE_URL REDIS_URL CELERY_BROKER_URL || true
# A pass's claim on SQLite is a lease: keep it short so a demo stopped mid-pass restarts promptly.
export SCHEDULING_PASS_LEASE_S="${SCHEDULING_PASS_LEASE_S:-30}"
PY=.venv/bin/python
CELERY=.venv/bin/celery
VAR="${VAR_DIR:-var}"
mkdir -p "$VAR/log"
step_started=$SECONDS
took() { echo "    done in $((SECONDS - step_started)) s"; step_started=$SECONDS; }
echo "==> Migrating the embedded database ($VAR/portal.sqlite3; about 10 s the first time)"
$PY manage.py migrate --noinput -v 0
took
echo "==> Loading the demo organisation"
$PY manage.py load_demo
took
if [ "${DEMO_HISTORY:-1}" != "0" ]; then
  echo "==> Backfilling 30 days of history so the charts are full at once (DEMO_HISTORY=0 skips)"
  $PY manage.py load_demo_history
  took
fi

pids=()
stop() {
  trap - INT TERM EXIT
  echo
  echo "==> Stopping the portal, the worker, beat and the traffic generator"
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
}
trap stop INT TERM EXIT

echo "==> Starting the Celery worker and beat (logs in $VAR/log/)"
$CELERY -A portal worker --pool solo --loglevel INFO --without-gossip --without-mingle \
  >"$VAR/log/worker.log" 2>&1 &
pids+=($!)
# A second worker for what-if replays (WHATIF_QUEUE), so a replay never holds up a pass.
$CELERY -A portal worker --pool solo --loglevel INFO --without-gossip --without-mingle -Q whatif -n whatif@%h \
  >"$VAR/log/whatif-worker.log" 2>&1 &
pids+=($!)
$CELERY -A portal beat --loglevel INFO --schedule "$VAR/celerybeat-schedule" >"$VAR/log/beat.log" 2>&1 &
pids+=($!)
echo "==> Starting demo traffic at ${DEMO_SPEED:-60}x real time (log in $VAR/log/traffic.log)"
$PY manage.py demo_traffic --speed "${DEMO_SPEED:-60}" >"$VAR/log/traffic.log" 2>&1 &
pids+=($!)
echo "==> Serving the portal at http://127.0.0.1:${PORT:-8000}  (Ctrl-C stops everything)"
$PY manage.py runserver --noreload "127.0.0.1:${PORT:-8000}" &
pids+=($!)
wait -n "${pids[@]}" || true
