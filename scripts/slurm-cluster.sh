#!/usr/bin/env bash
# A real Slurm 22.05 test cluster on this one machine: munge, slurmdbd (MariaDB), slurmctld and
# four slurmd (n1..n4, 8 fake GPUs each). Run as root.
#
#   scripts/slurm-cluster.sh start    # install packages if missing, start what is not running, wait for 4 nodes
#   scripts/slurm-cluster.sh stop     # cancel the jobs, stop the daemons this script started (pid files)
#   scripts/slurm-cluster.sh status   # exit 0 when the controller answers
#   scripts/slurm-cluster.sh reset    # stop, then remove the state directory (the next start is fresh)
#
# Everything lives under $SLURM_STATE_DIR (default /var/tmp/portal-slurm): configuration, controller
# state, spool, logs, pid files. Nothing outside it is written: clients find the cluster through
# SLURM_CONF=$SLURM_STATE_DIR/etc/slurm.conf (export it to use sbatch/squeue/sacctmgr by hand).
# Only processes named by our pid files (and job steps of our slurmd) are ever stopped; munged is
# started (and later stopped) only when none was running. A restart, after `stop` or a crash, keeps
# the controller's state (StateSaveLocation): pending jobs and job ids survive.
# The accounting database (MariaDB, $SLURM_DB_NAME) is kept; a fresh state directory continues job
# ids after the highest one it has recorded, so old and new jobs never share an id.
#
# Race-free control: JobSubmitPlugins=lua (job_submit.lua, written below) makes every GPU job wait
# for the portal (a begin time far in the future), so a plain `sbatch` never starts by itself; only
# the portal starts a job, after pinning its nodes (StartTime=now). A user's `scontrol hold` and
# `release` keep their usual meaning.
set -euo pipefail

STATE_DIR="${SLURM_STATE_DIR:-/var/tmp/portal-slurm}"
DB_NAME="${SLURM_DB_NAME:-slurm_acct_portal}"
DB_HOST="${SLURM_DB_HOST:-127.0.0.1}"
OPERATOR="${SLURM_OPERATOR:-daemon}"  # a non-root account the portal may run as (docs/slurm.md)
NODES=4
GPUS_PER_NODE=8
export SLURM_CONF="$STATE_DIR/etc/slurm.conf"

log() { echo "slurm-cluster: $*"; }

install_packages() {
  local missing=0
  for bin in slurmctld slurmd slurmdbd munged sbatch; do command -v "$bin" >/dev/null || missing=1; done
  [ "$missing" = 0 ] && return
  log "installing slurm-wlm slurmdbd munge slurm-client"
  # Wait for another apt run (CI installs its browser just before) instead of failing on its lock.
  local apt=(apt-get -o DPkg::Lock::Timeout=600 -y -qq)
  DEBIAN_FRONTEND=noninteractive "${apt[@]}" install slurm-wlm slurmdbd munge slurm-client >/dev/null \
    || { "${apt[@]}" update && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install slurm-wlm slurmdbd munge slurm-client >/dev/null; }
}

first_job_id() {  # kept across restarts (slurm.conf must not change under running slurmd)
  local kept
  kept=$(sed -n 's/^FirstJobId=//p' "$SLURM_CONF" 2>/dev/null || true)
  if [ -n "$kept" ] && [ -f "$STATE_DIR/ctld/job_state" ]; then echo "$kept"; return; fi
  local last
  last=$(mysql -h "$DB_HOST" -uroot -N -e "SELECT COALESCE(MAX(id_job), 0) FROM $DB_NAME.portal_job_table" 2>/dev/null || echo 0)
  echo $((${last:-0} + 1))
}

controller_answers() {
  [ -f "$SLURM_CONF" ] && timeout 5 scontrol ping 2>/dev/null | grep -q "UP"
}

write_configs() {
  mkdir -p "$STATE_DIR"/{etc,ctld,log,dev,run} "$STATE_DIR"/spool/n{1..4}
  for i in $(seq 0 $((GPUS_PER_NODE - 1))); do
    [ -e "$STATE_DIR/dev/gpu$i" ] || mknod "$STATE_DIR/dev/gpu$i" c 1 3
  done
  local first_id; first_id=$(first_job_id)  # before the file is truncated below
  cat >"$STATE_DIR/etc/slurm.conf" <<EOF
ClusterName=portal
FirstJobId=$first_id
SlurmctldHost=localhost
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$STATE_DIR/ctld
SlurmdSpoolDir=$STATE_DIR/spool/%n
SlurmctldPidFile=$STATE_DIR/run/slurmctld.pid
SlurmdPidFile=$STATE_DIR/run/slurmd-%n.pid
SlurmctldLogFile=$STATE_DIR/log/slurmctld.log
SlurmdLogFile=$STATE_DIR/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=2
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
JobSubmitPlugins=lua
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStorageTRES=gres/gpu
AccountingStorageEnforce=associations,limits
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
SlurmdParameters=config_overrides
ReturnToService=2
MinJobAge=600
KillWait=2
InactiveLimit=0
JobRequeue=0
SlurmctldTimeout=10
SlurmdTimeout=30
NodeName=n[1-$NODES] NodeHostname=localhost NodeAddr=127.0.0.1 Port=17001-1700$NODES CPUs=16 RealMemory=16000 Gres=gpu:$GPUS_PER_NODE State=UNKNOWN
PartitionName=gpu Nodes=n[1-$NODES] Default=YES MaxTime=INFINITE State=UP
EOF
  cat >"$STATE_DIR/etc/gres.conf" <<EOF
AutoDetect=off
NodeName=n[1-$NODES] Name=gpu File=$STATE_DIR/dev/gpu[0-$((GPUS_PER_NODE - 1))]
EOF
  cat >"$STATE_DIR/etc/cgroup.conf" <<EOF
CgroupPlugin=cgroup/v1
EOF
  # GPU jobs wait for the portal (a begin time far ahead, which only the portal moves to now);
  # CPU-only jobs pass through untouched. See scheduling/backends/slurm.py.
  sed "s/@OPERATOR_UIDS@/$(operator_uids)/" >"$STATE_DIR/etc/job_submit.lua" <<'EOF'
-- The GPU portal decides when GPU jobs start (scheduling/backends/slurm.py).
local WAIT_FOR_PORTAL = 50 * 365 * 86400  -- the begin time the portal moves to "now" when it starts a job
local TRUSTED = { @OPERATOR_UIDS@ }  -- root and the portal's operator account

local function trusted(uid)
  for _, allowed in ipairs(TRUSTED) do
    if uid == allowed then return true end
  end
  return false
end

local function wants_gpus(job_desc)
  for _, field in ipairs({ "tres_per_node", "tres_per_job", "tres_per_task", "tres_per_socket" }) do
    local value = job_desc[field]
    if value ~= nil and string.find(value, "gpu") then return true end
  end
  return false
end

function slurm_job_submit(job_desc, part_list, submit_uid)
  if not wants_gpus(job_desc) then
    return slurm.SUCCESS  -- CPU-only work is not the portal's: Slurm schedules it as usual
  end
  if job_desc.het_job_offset ~= nil and job_desc.het_job_offset ~= slurm.NO_VAL then
    slurm.log_user("GPU portal: heterogeneous GPU jobs are not supported; submit one job per component " ..
                   "(or one job with --nodes and --gres=gpu:N per node)")
    return slurm.ERROR
  end
  job_desc.begin_time = os.time() + WAIT_FOR_PORTAL
  return slurm.SUCCESS
end

-- Only the portal moves a GPU job's begin time; holds and releases keep their usual meaning.
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if trusted(modify_uid) then
    return slurm.SUCCESS
  end
  if job_desc.begin_time ~= nil and job_desc.begin_time ~= 0 and job_desc.begin_time ~= slurm.NO_VAL then
    slurm.log_user("GPU portal: a GPU job starts when the portal admits it; see the portal link in AdminComment")
    return slurm.ESLURM_ACCESS_DENIED or slurm.ERROR  -- scontrol says "Access/permission denied"
  end
  return slurm.SUCCESS
end
EOF
  cat >"$STATE_DIR/etc/slurmdbd.conf" <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=$DB_HOST
StoragePort=3306
StorageUser=root
StorageLoc=$DB_NAME
PidFile=$STATE_DIR/run/slurmdbd.pid
LogFile=$STATE_DIR/log/slurmdbd.log
EOF
  chmod 600 "$STATE_DIR/etc/slurmdbd.conf"
}

operator_uids() {  # root, and the portal's operator account when it exists on this machine
  local uids="0"
  id -u "$OPERATOR" >/dev/null 2>&1 && uids="0, $(id -u "$OPERATOR")"
  echo "$uids"
}

start_munge() {  # the machine's munged when one runs; else we start it and remember its pid
  pgrep -x munged >/dev/null && return
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create --force >/dev/null 2>&1 || /usr/sbin/create-munge-key -f; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged
  wait_for 10 munged test -s /run/munge/munged.pid
  cp /run/munge/munged.pid "$STATE_DIR/run/munged.pid"
}

start_mariadb() {  # slurmdbd's storage; started only when it does not answer
  mysqladmin -h "$DB_HOST" -uroot ping >/dev/null 2>&1 && return
  log "starting MariaDB"
  /etc/init.d/mariadb start >/dev/null 2>&1 || service mariadb start >/dev/null 2>&1 || true
  wait_for 30 MariaDB mysqladmin -h "$DB_HOST" -uroot ping
}

wait_for() {  # wait_for SECONDS DESCRIPTION COMMAND...
  local seconds=$1 what=$2; shift 2
  for _ in $(seq $((seconds * 10))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  log "timed out waiting for $what; logs in $STATE_DIR/log"; tail -n 20 "$STATE_DIR"/log/*.log >&2 || true
  return 1
}

nodes_idle() {
  [ "$(sinfo -h -N -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" -ge "$NODES" ]
}

nodes_responding() {  # busy or drained is fine: the cluster is up (a running test may be using it)
  [ "$(sinfo -h -N -o '%N %t' 2>/dev/null | grep -v -E ' (down|unk|fail|futr)' | sort -u | wc -l)" -ge "$NODES" ]
}

daemon_alive() {  # daemon_alive PIDFILE
  [ -f "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null
}

start() {
  install_packages
  if controller_answers && nodes_responding; then log "already running ($STATE_DIR)"; return; fi
  local fresh=0
  [ -f "$STATE_DIR/ctld/job_state" ] || fresh=1
  mkdir -p "$STATE_DIR/run"
  start_munge
  start_mariadb
  write_configs  # configuration only; the controller's state in $STATE_DIR/ctld is kept
  daemon_alive "$STATE_DIR/run/slurmdbd.pid" || slurmdbd
  wait_for 30 slurmdbd sacctmgr -n show cluster
  sacctmgr -n -P show cluster format=cluster | grep -qx portal || sacctmgr -i add cluster portal >/dev/null
  add_operator
  if ! daemon_alive "$STATE_DIR/run/slurmctld.pid"; then
    if [ "$fresh" = 1 ]; then slurmctld; else slurmctld -R; fi  # -R: recover the saved jobs
  fi
  wait_for 30 slurmctld controller_answers
  for i in $(seq 1 $NODES); do daemon_alive "$STATE_DIR/run/slurmd-n$i.pid" || slurmd -N "n$i"; done
  wait_for 60 "$NODES responding nodes" nodes_responding
  log "up: $NODES nodes x $GPUS_PER_NODE GPUs; export SLURM_CONF=$SLURM_CONF"
}

add_operator() {  # the portal may run its Slurm calls as $OPERATOR instead of root (docs/slurm.md)
  id -u "$OPERATOR" >/dev/null 2>&1 || return 0
  # Admin, not Operator: 22.05 refuses AdminComment, where the portal keeps its marks, to Operators.
  sacctmgr -n -P show user format=user | grep -qx "$OPERATOR" \
    || sacctmgr -i add user "$OPERATOR" account=root >/dev/null
  sacctmgr -i modify user "$OPERATOR" set adminlevel=Admin >/dev/null || true
}

kill_pidfiles() {  # TERM every daemon named by the pid files at once, then wait for all (KILL after 5 s)
  local pids=() file
  for file in "$@"; do [ -f "$file" ] && pids+=("$(cat "$file")"); done
  [ "${#pids[@]}" -gt 0 ] || return 0
  kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do
    local alive=() pid
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    [ "${#alive[@]}" -eq 0 ] && return 0
    sleep 0.1
  done
  kill -9 "${pids[@]}" 2>/dev/null || true
}

our_job_steps() {  # slurmstepd processes of this cluster's slurmd (their SLURM_CONF is ours)
  local pid
  for pid in $(pgrep -x slurmstepd || true); do
    tr '\0' '\n' <"/proc/$pid/environ" 2>/dev/null | grep -qx "SLURM_CONF=$SLURM_CONF" && echo "$pid"
  done
  return 0
}

stop_daemons() {
  [ -d "$STATE_DIR/run" ] || return 0
  if controller_answers; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    for _ in $(seq 50); do [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  kill_pidfiles "$STATE_DIR"/run/slurmd-*.pid "$STATE_DIR/run/slurmctld.pid"
  # Job steps can outlive slurmd; left running they would collide with the next cluster's job ids.
  local steps; steps=$(our_job_steps)
  [ -n "$steps" ] && kill -9 $steps 2>/dev/null || true
  kill_pidfiles "$STATE_DIR/run/slurmdbd.pid"  # last: slurmctld sends its final records to it
  rm -f "$STATE_DIR"/run/slurm*.pid
}

stop() {
  stop_daemons
  if [ -f "$STATE_DIR/run/munged.pid" ]; then  # only a munged this script started
    kill_pidfiles "$STATE_DIR/run/munged.pid"
    rm -f "$STATE_DIR/run/munged.pid"
  fi
  log "stopped (state kept in $STATE_DIR; \`$0 reset\` removes it)"
}

reset() {
  stop
  rm -rf "$STATE_DIR"
  log "state removed"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  reset) reset ;;
  status) controller_answers ;;
  *) echo "usage: $0 start|stop|status|reset" >&2; exit 2 ;;
esac
