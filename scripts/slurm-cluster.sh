#!/usr/bin/env bash
# A real Slurm 22.05 test cluster on this one machine: munge, slurmdbd (MariaDB), slurmctld and
# four slurmd (n1..n4, 8 fake GPUs each). Run as root.
#
#   scripts/slurm-cluster.sh start    # install packages if missing, start, wait until 4 nodes are idle
#   scripts/slurm-cluster.sh stop     # stop every daemon (munge too) and job step, remove the state directory
#   scripts/slurm-cluster.sh status   # exit 0 when the controller answers
#
# Idempotent: `start` on a running, answering cluster does nothing. A new start always uses a fresh
# state directory; the accounting database (MariaDB, $SLURM_DB_NAME) is kept, and job ids continue
# after the highest one it has recorded, so old and new jobs never share an id ("Duplicate jobid").
# The configuration lives under $SLURM_STATE_DIR; /etc/slurm/slurm.conf links to it so plain
# `sbatch`, `squeue` and `sacctmgr` work for every user of the machine.
#
# Race-free control: JobSubmitPlugins=lua holds every submitted job (priority 0), so a plain
# `sbatch` never starts by itself; only the portal releases a job, after pinning its nodes.
set -euo pipefail

STATE_DIR="${SLURM_STATE_DIR:-/var/tmp/portal-slurm}"
DB_NAME="${SLURM_DB_NAME:-slurm_acct_portal}"
DB_HOST="${SLURM_DB_HOST:-127.0.0.1}"
NODES=4
GPUS_PER_NODE=8
export SLURM_CONF="$STATE_DIR/etc/slurm.conf"

log() { echo "slurm-cluster: $*"; }

install_packages() {
  local missing=0
  for bin in slurmctld slurmd slurmdbd munged sbatch; do command -v "$bin" >/dev/null || missing=1; done
  [ "$missing" = 0 ] && return
  log "installing slurm-wlm slurmdbd munge slurm-client"
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmdbd munge slurm-client >/dev/null \
    || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm slurmdbd munge slurm-client >/dev/null; }
}

first_job_id() {
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
  cat >"$STATE_DIR/etc/slurm.conf" <<EOF
ClusterName=portal
FirstJobId=$(first_job_id)
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
  # Every job is held at submission: only the portal releases it (after pinning its nodes).
  cat >"$STATE_DIR/etc/job_submit.lua" <<'EOF'
function slurm_job_submit(job_desc, part_list, submit_uid)
  job_desc.priority = 0
  return slurm.SUCCESS
end

-- Users may hold their own jobs but never release them (a release is a priority change).
function slurm_job_modify(job_desc, job_rec, part_list, modify_uid)
  if modify_uid ~= 0 and job_desc.priority ~= nil and job_desc.priority ~= slurm.NO_VAL
     and job_desc.priority ~= 0 then
    slurm.log_user("jobs start when the GPU portal admits them: only the portal releases a job")
    return slurm.ERROR
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
  mkdir -p /etc/slurm
  for f in slurm.conf gres.conf cgroup.conf job_submit.lua slurmdbd.conf; do
    ln -sfn "$STATE_DIR/etc/$f" "/etc/slurm/$f"
  done
}

start_munge() {
  pgrep -x munged >/dev/null && return
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge
  [ -s /etc/munge/munge.key ] || { mungekey --create --force >/dev/null 2>&1 || /usr/sbin/create-munge-key -f; }
  chown munge:munge /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
  runuser -u munge -- /usr/sbin/munged
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

start() {
  install_packages
  if controller_answers && nodes_responding; then log "already running ($STATE_DIR)"; return; fi
  stop_daemons
  rm -rf "$STATE_DIR"
  start_munge
  start_mariadb
  write_configs
  slurmdbd
  wait_for 30 slurmdbd sacctmgr -n show cluster
  sacctmgr -n -P show cluster format=cluster | grep -qx portal || sacctmgr -i add cluster portal >/dev/null
  slurmctld
  wait_for 30 slurmctld controller_answers
  for i in $(seq 1 $NODES); do slurmd -N "n$i"; done
  wait_for 60 "$NODES idle nodes" nodes_idle
  log "up: $NODES nodes x $GPUS_PER_NODE GPUs (SLURM_CONF=$SLURM_CONF)"
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

stop_daemons() {
  [ -d "$STATE_DIR/run" ] || return 0
  if controller_answers; then
    squeue -h -o %i 2>/dev/null | xargs -r scancel 2>/dev/null || true
    for _ in $(seq 30); do [ -z "$(squeue -h -t R,CG -o %i 2>/dev/null)" ] && break; sleep 0.1; done
  fi
  kill_pidfiles "$STATE_DIR"/run/slurmd-*.pid "$STATE_DIR/run/slurmctld.pid"
  # Job steps outlive slurmd; left running they would collide with the next cluster's job ids.
  local steps; steps=$(pgrep -x slurmstepd || true)
  [ -n "$steps" ] && kill -9 $steps 2>/dev/null || true
  kill_pidfiles "$STATE_DIR/run/slurmdbd.pid"  # last: slurmctld sends its final records to it
}

stop() {
  stop_daemons
  kill_pidfiles /run/munge/munged.pid
  rm -rf "$STATE_DIR"
  for f in slurm.conf gres.conf cgroup.conf job_submit.lua slurmdbd.conf; do
    [ -L "/etc/slurm/$f" ] && rm -f "/etc/slurm/$f"
  done
  log "stopped"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  status) controller_answers ;;
  *) echo "usage: $0 start|stop|status" >&2; exit 2 ;;
esac
