#!/usr/bin/env bash
# scripts/fault-matrix.sh [MEGASCALE_BINARY]: the fault matrix of `megascale
# run` (robust/), a CI gate (ctest fault_matrix).
#
# Runs scenarios/cpu/robust-tiny.toml (2 CPU ranks, DP 2, a checkpoint every 2
# steps) once without a fault, then once more on that run's checkpoints (line
# rerun_finished: a finished job resumes at its end, trains nothing and must
# complete in one attempt with no detection), once with a checkpoint folder
# whose lock cannot be taken (line job_error: the job's own error; the driver must stop
# after the second attempt), once with a kill and no recovery allowed (line
# gave_up: the detection is still recorded), once with a learning rate that
# diverges (line diverged: stopped in the first attempt, nothing evicted),
# once stopped by SIGTERM (line signal_stop: the driver exits within a poll,
# under 3 s, with every rank gone, whatever the heartbeat period),
# then once per fault, each from an
# empty checkpoint folder, and prints one line per fault:
#   fault=NAME detected_s=X diagnosis=right|wrong resumed_s=Y loss=identical|differs
#     self_check=faulty|passed|none [self_check_s=Z] detected_by=KIND [nodes=netns]
# detected_s: injection -> the driver's detection; resumed_s: injection -> the
# first step of the relaunched job (redis_kill: -> every rank heartbeating to
# the restarted Redis; training never stops). loss: the run's loss per step
# against the uninterrupted run's, bit for bit (JSON numbers as written). Exits 1
# when any line is not right and identical, a run did not complete, or a run
# detected a fault where none was injected (a false positive), or the
# self-check on the suspected node (robust/self_check.h) did not fail for slow
# and traffic_stop (an emulated slow processor, a dead link) and pass for hang.
# slow_all (every rank slowed alike) must be found against the job's own
# baseline (detected_by=uniform_slowdown) and evict nothing (one attempt).
#
# The first faults run on local processes (each executor is a "node"). Then,
# with [recovery] nodes = "netns" (robust/netns.h: a network namespace per
# node, veth pairs to a bridge, MPI over TCP across them): a run without a
# fault (losses bit-identical to the local run's, no detection), link_cut (the
# node's veth set down) and node_down (its namespace gone), each evicted to the
# spare and resumed. Where namespaces cannot be made (not root, no iproute2,
# no CAP_NET_ADMIN) those lines say "skipped" with the reason and do not fail
# the script. FAULT_MATRIX_NODES=netns runs every fault on namespaces (the
# self-checks' all-reduces then cross the veths too; not in CI: it fails where
# namespaces cannot be made).
# Last, fault=driver_kill: the driver SIGKILLed mid-run; every process it had
# started must be gone within 5 s (survivors=0), or the script exits 1.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN="${1:-build/megascale}"
SCENARIO="scenarios/cpu/robust-tiny.toml"
TMP="$(mktemp -d /tmp/megascale-fault-matrix.XXXXXX)"
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v jq >/dev/null || { echo "fault-matrix: jq is needed (apt-get install jq)"; exit 2; }
if ! command -v redis-server >/dev/null; then
  echo "SKIPPED: redis-server is not installed (scripts/setup.sh installs it)"
  exit 0
fi

ALL_NETNS=()
if [ "${FAULT_MATRIX_NODES:-local}" = netns ]; then ALL_NETNS=(--set 'recovery.nodes="netns"'); fi

run() {  # run NAME [--inject SPEC] [--set KEY=VALUE]
  local name="$1"; shift
  set -- "$@" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}"
  "$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/$name/ckpt\"" --set "train.work_dir=\"$TMP/$name/work\"" \
    --out "$TMP/$name.json" --work-dir "$TMP/$name/run" "$@" >"$TMP/$name.log" 2>&1 || true
}

run reference
if [ "$(jq -r .completed "$TMP/reference.json" 2>/dev/null)" != "true" ]; then
  echo "fault-matrix: the uninterrupted run failed:"; cat "$TMP/reference.log"; exit 1
fi
REF="$(jq -c .losses "$TMP/reference.json")"
if [ "$(jq -r '.faults | length' "$TMP/reference.json")" != "0" ]; then
  echo "fault-matrix: the run without a fault detected one (a false positive):"
  jq -r '.faults[] | "    \(.detected_by): \(.detection_detail)"' "$TMP/reference.json"; exit 1
fi

# A finished job run again (the reference's checkpoint folder): it resumes at
# its final checkpoint and trains nothing, so no loss line comes. Complete in
# one attempt with no detection (it once relaunched until max_restarts). Its
# work directory holds an earlier run's rank log with an error line: the driver
# removes old attempt folders first (robust/attempt_dirs.h; it once read that
# line as this run's fault and evicted a healthy node).
mkdir -p "$TMP/rerun/run/attempt_1"
echo "megascale train: rank 0: a stale error line of an earlier run" >"$TMP/rerun/run/attempt_1/rank_0.log"
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/reference/ckpt\"" --set "train.work_dir=\"$TMP/rerun/work\"" \
  --out "$TMP/rerun.json" --work-dir "$TMP/rerun/run" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}" >"$TMP/rerun.log" 2>&1 || true
rline="rerun_finished completed=$(jq -r .completed "$TMP/rerun.json" 2>/dev/null) attempts=$(jq -r .attempts "$TMP/rerun.json" 2>/dev/null) detections=$(jq -r '.faults | length' "$TMP/rerun.json" 2>/dev/null)"
echo "$rline"
case "$rline" in
  *completed=true\ attempts=1\ detections=0) ;;
  *) echo "    (expected completed=true attempts=1 detections=0; log follows)"; sed 's/^/    /' "$TMP/rerun.log" | tail -20; rerun_failed=1 ;;
esac

# The job's own error, no fault injected: the checkpoint folder's LOCK is a
# folder, so rank 0 cannot take the lock (engine/trainer.cc) in any attempt.
# (A checkpoint folder that cannot be made at all is refused before launch,
# engine/launch_check.h.) The driver evicts the reporting node once; when the
# same error comes back on the spare it stops (robust/diagnosis.h
# engine_error_text) instead of evicting node after node until [recovery]
# max_restarts (it once did).
mkdir -p "$TMP/job_error/ckpt/LOCK"
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/job_error/ckpt\"" --set "train.work_dir=\"$TMP/job_error/work\"" \
  --out "$TMP/job_error.json" --work-dir "$TMP/job_error/run" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}" >"$TMP/job_error.log" 2>&1 || true
jline="job_error completed=$(jq -r .completed "$TMP/job_error.json" 2>/dev/null) attempts=$(jq -r .attempts "$TMP/job_error.json" 2>/dev/null) stopped=$(jq -r '.error // "" | test("is the job.s") ' "$TMP/job_error.json" 2>/dev/null)"
echo "$jline"
case "$jline" in
  *completed=false\ attempts=2\ stopped=true) ;;
  *) echo "    (expected completed=false attempts=2 stopped=true; log follows)"; sed 's/^/    /' "$TMP/job_error.log" | tail -20; rerun_failed=1 ;;
esac

# No recovery allowed ([recovery] max_restarts = 0): the kill is detected,
# the driver gives up, and the profile records the detection (it once listed
# the fault as never detected).
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/gave_up/ckpt\"" --set "train.work_dir=\"$TMP/gave_up/work\"" \
  --set recovery.max_restarts=0 --inject kill:rank=1:step=5 \
  --out "$TMP/gave_up.json" --work-dir "$TMP/gave_up/run" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}" >"$TMP/gave_up.log" 2>&1 || true
gline="gave_up completed=$(jq -r .completed "$TMP/gave_up.json" 2>/dev/null) attempts=$(jq -r .attempts "$TMP/gave_up.json" 2>/dev/null) detected_by=$(jq -r '[.faults[] | select(.fault == "kill") | .detected_by] | join(",")' "$TMP/gave_up.json" 2>/dev/null)"
echo "$gline"
case "$gline" in
  *completed=false\ attempts=1\ detected_by=process_gone|*completed=false\ attempts=1\ detected_by=log_error) ;;
  *) echo "    (expected completed=false attempts=1 detected_by=process_gone or log_error; log follows)"; sed 's/^/    /' "$TMP/gave_up.log" | tail -20; rerun_failed=1 ;;
esac

# A diverged training, no fault injected (learning_rate 1e9: the loss is NaN
# at step 2, every rank stops there, rank 0 says why): the job's error from
# the first time, so the driver stops in attempt 1 and evicts nothing. It once
# read the ranks' exits as node faults and evicted node after node until
# max_restarts.
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/diverged/ckpt\"" --set "train.work_dir=\"$TMP/diverged/work\"" \
  --set train.learning_rate=1e9 \
  --out "$TMP/diverged.json" --work-dir "$TMP/diverged/run" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}" >"$TMP/diverged.log" 2>&1 || true
dline="diverged completed=$(jq -r .completed "$TMP/diverged.json" 2>/dev/null) attempts=$(jq -r .attempts "$TMP/diverged.json" 2>/dev/null) evicted=$(jq -r '[.faults[] | select(.evicted_node >= 0)] | length' "$TMP/diverged.json" 2>/dev/null) stopped=$(jq -r '.error // "" | test("diverged training is the job.s")' "$TMP/diverged.json" 2>/dev/null)"
echo "$dline"
case "$dline" in
  *completed=false\ attempts=1\ evicted=0\ stopped=true) ;;
  *) echo "    (expected completed=false attempts=1 evicted=0 stopped=true; log follows)"; sed 's/^/    /' "$TMP/diverged.log" | tail -20; rerun_failed=1 ;;
esac

# SIGTERM to the driver stops the run within a poll, whatever the heartbeat
# period: the driver polls at most 0.5 s apart (robust/driver.cc). It polled
# every heartbeat_period_s / 4, 25 s here, and a period of 1e9 s slept
# through the signal. Sent once the job has saved step 2 (it trains); the
# line gives the seconds from the signal to the driver's exit and the job's
# processes left after it.
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/signal/ckpt\"" --set "train.work_dir=\"$TMP/signal/work\"" \
  --set recovery.heartbeat_period_s=100 --set train.steps=1000000 \
  --out "$TMP/signal.json" --work-dir "$TMP/signal/run" "${ALL_NETNS[@]+"${ALL_NETNS[@]}"}" >"$TMP/signal.log" 2>&1 &
spid=$!
for _ in $(seq 1 300); do [ -e "$TMP/signal/ckpt/step_00000002/COMPLETE" ] && break; sleep 0.1; done
t0=$(date +%s.%N)
kill -TERM "$spid"
wait "$spid" || true
t1=$(date +%s.%N)
left=$({ pgrep -f "[m]egascale-train.*$TMP/signal" || true; } | wc -l)
sline="signal_stop stop_s=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.2f", b - a }') stopped=$(jq -r '.error // "" | test("stopped by signal 15")' "$TMP/signal.json" 2>/dev/null) left=$left"
echo "$sline"
case "$sline" in
  signal_stop\ stop_s=[0-2].*\ stopped=true\ left=0) ;;
  *) echo "    (expected stop_s below 3, stopped=true, left=0; log follows)"; sed 's/^/    /' "$TMP/signal.log" | tail -20; rerun_failed=1
     pkill -9 -f "[m]egascale-train.*$TMP/signal" || true ;;
esac

FAULTS=(
  "kill:rank=1:step=5"
  "hang:rank=0:step=5"
  "traffic_stop:rank=1:step=6"
  "corrupt_checkpoint:rank=1:step=8"
  "redis_kill:step=5"
  # 400% (5x against slow_factor 2.5): the background checkpoint writer's CPU
  # is no longer counted in a rank's compute (engine/background_cpu.h), which
  # had narrowed 5x to 2.47x on the steps after a save (robust/README.md).
  "slow:rank=1:step=3:percent=400"
  "slow_all:step=8:percent=400"
  "link_cut:rank=1:step=5"
  "node_down:rank=1:step=5"
)
NETNS='recovery.nodes="netns"'
# Namespaces: a cheap look first; the driver's own probe (and its reason, in
# the profile) decides.
netns_why=""
if [ "$(id -u)" != 0 ]; then netns_why="not root"
elif ! command -v ip >/dev/null && [ ! -x /usr/sbin/ip ]; then netns_why="no ip command (iproute2)"
fi
if [ -z "$netns_why" ]; then
  run reference_netns --set "$NETNS"
  if [ "$(jq -r .node_kind "$TMP/reference_netns.json" 2>/dev/null)" != "netns" ]; then
    netns_why="$(jq -r '.netns_unavailable // "the driver did not make namespaces"' "$TMP/reference_netns.json" 2>/dev/null || echo "no profile")"
  fi
fi
status=${rerun_failed:-0}
if [ -n "$netns_why" ]; then
  echo "reference nodes=netns skipped ($netns_why)"
else
  nline="reference nodes=netns loss=$(jq -r --argjson ref "$REF" 'if .completed and .losses == $ref then "identical" else "differs" end' "$TMP/reference_netns.json") detections=$(jq -r '.faults | length' "$TMP/reference_netns.json")"
  echo "$nline"
  case "$nline" in
    *loss=identical\ detections=0) ;;
    *) status=1; sed 's/^/    /' "$TMP/reference_netns.log" | tail -40 ;;
  esac
fi
for spec in "${FAULTS[@]}"; do
  name="${spec%%:*}"
  case "$name" in
    link_cut|node_down)
      if [ -n "$netns_why" ]; then
        echo "fault=$name detected_s=n/a diagnosis=n/a resumed_s=n/a loss=n/a skipped (needs network namespaces: $netns_why)"
        continue
      fi
      run "$name" --inject "$spec" --set "$NETNS" ;;
    *) run "$name" --inject "$spec" ;;
  esac
  json="$TMP/$name.json"
  if [ ! -s "$json" ]; then
    echo "fault=$name detected_s=n/a diagnosis=wrong resumed_s=n/a loss=differs (no profile; log follows)"
    sed 's/^/    /' "$TMP/$name.log"; status=1; continue
  fi
  line="$(jq -r --arg f "$name" --argjson ref "$REF" '
    ([.faults[] | select(.fault == $f)][0]) as $r
    | "fault=\($f) detected_s=\(if $r.stages_s.detection_s == null then "n/a" else ($r.stages_s.detection_s * 100 | round / 100) end)"
      + " diagnosis=\(if $r.diagnosis_right then "right" else "wrong" end)"
      + " resumed_s=\(if $r.stages_s.resumed_s == null then "n/a" else ($r.stages_s.resumed_s * 100 | round / 100) end)"
      + " loss=\(if .completed and .reruns_identical and .losses == $ref then "identical" else "differs" end)"
      + " self_check=\(if $r.self_check == null then "none" elif $r.self_check.faulty then "faulty" else "passed" end)"
      + "\(if $r.stages_s.self_check_s == null then "" else " self_check_s=\($r.stages_s.self_check_s * 100 | round / 100)" end)"
      + " detected_by=\($r.detected_by // "none")"
      + "\(if .node_kind == "netns" then " nodes=netns" else "" end)"' "$json")"
  echo "$line"
  extra="$(jq -r '[.faults[] | select(.fault == "none")] | length' "$json")"
  if [ "$extra" != "0" ]; then
    echo "    ($extra detection(s) with no injected fault: false positives)"; status=1
    jq -r '.faults[] | select(.fault == "none") | "      \(.detected_by): \(.detection_detail) -> \(.diagnosis)"' "$json"
    jq -r '.events[]' "$json" | sed 's/^/      /' | tail -30
  fi
  case "$line" in
    *diagnosis=right*loss=identical*) ;;
    *) status=1; sed 's/^/    /' "$TMP/$name.log" | tail -40 ;;
  esac
  # A slow processor and a dead link are what the self-checks exist for: the
  # suspected node must fail them (robust/self_check.h); a hang passes them.
  case "$name:$line" in
    slow:*self_check=faulty*|traffic_stop:*self_check=faulty*|hang:*self_check=passed*) ;;
    slow:*|traffic_stop:*|hang:*) echo "    (expected the self-check to $([ "$name" = hang ] && echo pass || echo fail) on the suspected node)"; status=1 ;;
  esac
  # A job-wide slowdown has no node to blame: found against the job's own
  # baseline, nothing evicted, no restart.
  if [ "$name" = slow_all ]; then
    case "$line:$(jq -r .attempts "$json")" in
      *detected_by=uniform_slowdown*:1) ;;
      *) echo "    (expected detected_by=uniform_slowdown and one attempt: nothing evicted)"; status=1 ;;
    esac
  fi
  case "$name:$line" in
    link_cut:*nodes=netns*|node_down:*nodes=netns*) ;;
    link_cut:*|node_down:*) echo "    (expected the run on network namespaces)"; status=1 ;;
    *:*nodes=netns*) ;;
    *) if [ ${#ALL_NETNS[@]} -gt 0 ]; then echo "    (FAULT_MATRIX_NODES=netns: expected the run on network namespaces)"; status=1; fi ;;
  esac
done

# A driver SIGKILLed mid-run (no handler, no destructor runs) must not leave its
# job training unwatched: redis-server and mpirun get SIGTERM from the kernel
# when the driver dies (PR_SET_PDEATHSIG, robust/redis_server.cc and
# robust/driver.cc), mpirun ends its ranks, and the executors see their driver
# gone. Every process the driver had started must be gone within 5 s.
descendants() {  # descendants PID: every live process below PID
  local kid
  for kid in $(ps -o pid= --ppid "$1" 2>/dev/null); do echo "$kid"; descendants "$kid"; done
}
alive() { [ -r "/proc/$1/stat" ] && ! awk '{ s = $0; sub(/.*\) /, "", s); exit (substr(s, 1, 1) ~ /[ZX]/) ? 0 : 1 }' "/proc/$1/stat"; }
"$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/driver_kill/ckpt\"" --set "train.work_dir=\"$TMP/driver_kill/work\"" \
  --set train.steps=100000 --set train.checkpoint_every=50000 \
  --out "$TMP/driver_kill.json" --work-dir "$TMP/driver_kill/run" >"$TMP/driver_kill.log" 2>&1 &  # local processes (netns: not checked)
driver=$!
for _ in $(seq 1 200); do  # up to 20 s for the job to report a step (through mpirun)
  grep -qs '"step"' "$TMP/driver_kill/run/attempt_1/mpirun.out" && break
  sleep 0.1
done
started="$(descendants "$driver" | sort -n | tr '\n' ' ')"
kill -9 "$driver" 2>/dev/null; wait "$driver" 2>/dev/null || true
t0=$(date +%s.%N); left=""
for _ in $(seq 1 50); do
  left=""; for p in $started; do if alive "$p"; then left="$left $p"; fi; done
  [ -z "$left" ] && break
  sleep 0.1
done
gone_s=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.2f", b - a }')
line="fault=driver_kill processes=$(echo $started | wc -w) survivors=$(echo $left | wc -w) gone_s=$gone_s"
echo "$line"
if [ -z "$started" ] || ! grep -qs '"step"' "$TMP/driver_kill/run/attempt_1/mpirun.out"; then
  echo "    (the job never started training; log follows)"; sed 's/^/    /' "$TMP/driver_kill.log" | tail -20; status=1
elif [ -n "$left" ]; then
  echo "    (processes that outlived their SIGKILLed driver:"; for p in $left; do echo "     $(ps -o pid=,args= -p "$p" 2>/dev/null)"; done; echo "    )"
  kill -9 $left 2>/dev/null || true; status=1
fi
exit $status
