# Sourced by scripts/test.sh and scripts/test-sanitized.sh: `phase NAME COMMAND...` runs the
# command and records its wall time; the outermost script prints every phase's time when it exits,
# failed or not (so CI's log ends with where the time went).
if [[ -z "${CKPT_PHASES_FILE:-}" ]]; then
  CKPT_PHASES_FILE=$(mktemp)
  export CKPT_PHASES_FILE
  ckpt_phases_started=$SECONDS
  ckpt_phases_report() {
    printf '\nphase times (wall):\n'
    cat "$CKPT_PHASES_FILE"
    printf '  %-26s %5d s\n' total $((SECONDS - ckpt_phases_started))
    rm -f "$CKPT_PHASES_FILE"
  }
  trap ckpt_phases_report EXIT
fi
phase() {
  local name=$1 t0=$SECONDS
  shift
  if "$@"; then
    printf '  %-26s %5d s\n' "$name" $((SECONDS - t0)) >>"$CKPT_PHASES_FILE"
  else
    local rc=$?
    printf '  %-26s %5d s  FAILED (exit %d)\n' "$name" $((SECONDS - t0)) "$rc" >>"$CKPT_PHASES_FILE"
    return "$rc"
  fi
}
