#!/usr/bin/env bash
# scripts/fault-bench.sh [REPS [SEED [MEGASCALE_BINARY]]]: the fault-injection
# benchmark of `megascale run` (robust/): REPS runs (default 20) of
# scenarios/cpu/robust-tiny.toml, each with one random fault (kind, rank and
# step drawn from bash's RANDOM seeded with SEED, default 15: the same seed
# prints the same draws) or, for kind "none", no fault at all. Then:
#   false positives  detections that name no injected fault (a run without a
#                    fault that recovered anyway, or a second detection) or that
#                    name the wrong rank, over all runs (the uninterrupted
#                    reference run included)
#   false negatives  injected faults never detected, over the injected faults
#   time back to training  injection -> the first step of the relaunched job
#                    (resumed_s of the profile), p50 and p99 (nearest rank) over
#                    the faults that stopped training; redis_kill never stops
#                    it and is reported apart (-> every rank heartbeating again)
#   loss             bit-identical to one uninterrupted run, per run
# Prints one line per run and the summary, and writes the same to
# results/recovery/fault-bench.md. Not a CI test (about 2 minutes on 2 cores; it
# rewrites the results file).
set -euo pipefail
cd "$(dirname "$0")/.."
REPS="${1:-20}"
SEED="${2:-15}"
BIN="${3:-build/megascale}"
SCENARIO="scenarios/cpu/robust-tiny.toml"
OUT_MD="results/recovery/fault-bench.md"
TMP="$(mktemp -d /tmp/megascale-fault-bench.XXXXXX)"
KEEP="$TMP.kept"  # profiles and logs of the runs with a false positive
trap 'rm -rf "$TMP"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
command -v jq >/dev/null || { echo "fault-bench: jq is needed (apt-get install jq)"; exit 2; }
command -v redis-server >/dev/null || { echo "fault-bench: redis-server is needed (scripts/setup.sh)"; exit 2; }
case "$REPS" in ''|*[!0-9]*) echo "fault-bench: REPS must be a whole number, got '$REPS'"; exit 2 ;; esac
case "$SEED" in ''|*[!0-9]*) echo "fault-bench: SEED must be a whole number, got '$SEED'"; exit 2 ;; esac

STEPS="$(sed -n 's/^steps *= *\([0-9]*\).*/\1/p' "$SCENARIO")"
RANKS="$(sed -n 's/^gpus *= *\([0-9]*\).*/\1/p' "$SCENARIO")"
# Faults are drawn at steps 3 .. STEPS-6: a complete checkpoint exists before
# (checkpoint_every = 2, for corrupt_checkpoint) and a slow rank has the
# slow_steps = 4 steps after it that its detection needs.
FIRST_STEP=3
LAST_STEP=$((STEPS - 6))
KINDS=(kill hang slow traffic_stop corrupt_checkpoint redis_kill none)
PERCENTS=(300 400 500)

run() {  # run NAME [--inject SPEC]
  local name="$1"; shift
  "$BIN" run "$SCENARIO" --set "train.checkpoint_dir=\"$TMP/$name/ckpt\"" --set "train.work_dir=\"$TMP/$name/work\"" \
    --out "$TMP/$name.json" --work-dir "$TMP/$name/run" "$@" >"$TMP/$name.log" 2>&1 || true
}

START=$(date +%s)
run reference
if [ "$(jq -r .completed "$TMP/reference.json" 2>/dev/null)" != "true" ]; then
  echo "fault-bench: the uninterrupted run failed:"; cat "$TMP/reference.log"; exit 1
fi
REF="$(jq -c .losses "$TMP/reference.json")"
# The uninterrupted run is a run without a fault too: any detection in it is a
# false positive.
FP_QUERY='[.faults[] | select(.detected_by != "" and .detected_by != null)
           | select(.fault == "none" or (.diagnosis_right | not))] | length'
ref_fp="$(jq -r "$FP_QUERY" "$TMP/reference.json")"

RANDOM=$SEED
LINES=()
runs=0; injected=0; missed=0; false_pos=$ref_fp; identical=0; completed=0; clean=1
BACK=()        # resumed_s of faults that stopped training
REDIS_BACK=()  # redis_kill: -> every rank heartbeating to the restarted Redis
for i in $(seq 1 "$REPS"); do
  kind="${KINDS[$((RANDOM % ${#KINDS[@]}))]}"
  rank=$((RANDOM % RANKS))
  step=$((FIRST_STEP + RANDOM % (LAST_STEP - FIRST_STEP + 1)))
  percent="${PERCENTS[$((RANDOM % ${#PERCENTS[@]}))]}"
  case "$kind" in
    none) spec="" ;;
    redis_kill) spec="redis_kill:step=$step" ;;
    slow) spec="slow:rank=$rank:step=$step:percent=$percent" ;;
    *) spec="$kind:rank=$rank:step=$step" ;;
  esac
  name="run$i"
  if [ -z "$spec" ]; then run "$name"; else run "$name" --inject "$spec"; fi
  runs=$((runs + 1))
  json="$TMP/$name.json"
  if [ ! -s "$json" ]; then
    line="run=$i fault=${spec:-none} completed=false (no profile written)"
    LINES+=("$line"); echo "$line"; sed 's/^/    /' "$TMP/$name.log" | tail -20
    [ -n "$spec" ] && { injected=$((injected + 1)); missed=$((missed + 1)); }
    continue
  fi
  # Detections that are not the injected fault, or name the wrong rank.
  fp="$(jq -r "$FP_QUERY" "$json")"
  false_pos=$((false_pos + fp))
  detected="n/a"; back="n/a"; diag="-"
  [ -z "$spec" ] && clean=$((clean + 1))
  if [ -n "$spec" ]; then
    injected=$((injected + 1))
    rec="$(jq -c --arg f "$kind" '[.faults[] | select(.fault == $f)][0] // {}' "$json")"
    by="$(jq -r '.detected_by // ""' <<<"$rec")"
    if [ -z "$by" ]; then
      missed=$((missed + 1)); diag="missed"
    else
      diag="$(jq -r 'if .diagnosis_right then "right" else "wrong" end' <<<"$rec")"
      detected="$(jq -r '.stages_s.detection_s // "n/a" | if type == "number" then (. * 100 | round / 100) else . end' <<<"$rec")"
      back="$(jq -r '.stages_s.resumed_s // "n/a" | if type == "number" then (. * 100 | round / 100) else . end' <<<"$rec")"
      if [ "$back" != "n/a" ]; then
        if [ "$kind" = "redis_kill" ]; then REDIS_BACK+=("$back"); else BACK+=("$back"); fi
      fi
    fi
  fi
  done_ok="$(jq -r .completed "$json")"
  [ "$done_ok" = "true" ] && completed=$((completed + 1))
  loss="differs"
  if [ "$done_ok" = "true" ] && [ "$(jq -r .reruns_identical "$json")" = "true" ] && \
     [ "$(jq -c .losses "$json")" = "$REF" ]; then
    loss="identical"; identical=$((identical + 1))
  fi
  line="run=$i fault=${spec:-none} detected_s=$detected diagnosis=$diag resumed_s=$back loss=$loss false_positives=$fp"
  note="$(jq -r '[.faults[].notes // [] | .[]] | join("; ")' "$json")"
  [ -n "$note" ] && line="$line ($note)"
  if [ "$fp" != "0" ]; then  # what the false detection was, and the run kept for a look
    line="$line false: $(jq -r '[.faults[] | select(.detected_by != null and .detected_by != "")
      | select(.fault == "none" or (.diagnosis_right | not))
      | "\(.detected_by) (\(.detection_detail)) -> \(.diagnosis)"] | join("; ")' "$json")"
    mkdir -p "$KEEP"; cp "$json" "$KEEP/$name.json"; cp -r "$TMP/$name/run" "$KEEP/$name-run"
  fi
  LINES+=("$line"); echo "$line"
done

pct() {  # pct P VALUES...: nearest-rank percentile
  local p="$1"; shift
  [ "$#" -eq 0 ] && { echo "n/a"; return; }
  printf '%s\n' "$@" | sort -g | awk -v p="$p" '{v[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; if (r>NR) r=NR; print v[r]}'
}
rate() { awk -v a="$1" -v b="$2" 'BEGIN { if (b == 0) print "n/a"; else printf "%.1f%%", 100 * a / b }'; }
ELAPSED=$(( $(date +%s) - START ))
SUMMARY=(
  "runs=$runs injected=$injected completed=$completed loss_identical=$identical"
  "false_positive_rate=$(rate "$false_pos" "$((runs + 1))") ($false_pos detection(s) naming no injected fault or the wrong rank, over $((runs + 1)) runs: $runs drawn + the reference; $clean of them without a fault)"
  "false_negative_rate=$(rate "$missed" "$injected") ($missed of $injected injected faults not detected)"
  "time_back_to_training_s p50=$(pct 50 "${BACK[@]+"${BACK[@]}"}") p99=$(pct 99 "${BACK[@]+"${BACK[@]}"}") (n=${#BACK[@]}, faults that stopped training; p99 is the nearest rank)"
  "redis_kill_back_s p50=$(pct 50 "${REDIS_BACK[@]+"${REDIS_BACK[@]}"}") (n=${#REDIS_BACK[@]}, training never stopped)"
  "wall_s=$ELAPSED"
)
printf '%s\n' "${SUMMARY[@]}"

mkdir -p "$(dirname "$OUT_MD")"
{
  echo "<!-- generated by scripts/fault-bench.sh $REPS $SEED on $(date -u +%Y-%m-%dT%H:%M:%SZ); do not edit -->"
  echo "# Fault-injection benchmark ($SCENARIO)"
  echo
  echo "Command: \`scripts/fault-bench.sh $REPS $SEED\` ($(nproc) cores, load average at the end: $(cut -d' ' -f1-3 /proc/loadavg))."
  echo "$REPS runs of the 2-rank CPU job, each with one fault drawn at random (kind, rank, step $FIRST_STEP..$LAST_STEP of $STEPS)"
  echo "or none; local processes, no network namespaces."
  echo
  echo '```'
  printf '%s\n' "${LINES[@]}"
  echo
  printf '%s\n' "${SUMMARY[@]}"
  echo '```'
} >"$OUT_MD"
echo "wrote $OUT_MD"
[ -d "$KEEP" ] && echo "runs with a false positive kept in $KEEP"
true
