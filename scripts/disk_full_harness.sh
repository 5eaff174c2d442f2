#!/usr/bin/env bash
# Disk-full harness: a run directory on a small tmpfs (in a private mount namespace), filled so
# that FREE KiB are left, then a resume that saves. At every level the demo must fail with one
# clear line or succeed — never die of a signal (ENOSPC inside H5Fclose used to SIGSEGV at exit)
# — leave no *.tmp file, leave `ckpt verify` passing, and once the space is back a resume must end
# bit-identical to a run that never hit a full disk.
#
#   sudo scripts/disk_full_harness.sh [BUILD_DIR] [FROM_KIB] [TO_KIB] [STEP_KIB]
#
# The seed run's spare rank file (RUN/.spare, docs/format.md §2 step 5) is removed, so the save
# writes a fresh rank file and needs space for it; CKPT_HARNESS_KEEP_SPARE=1 keeps it (the save
# then overwrites it in place and needs only a few KiB for the manifest and commit record).
# Needs root (mount) and unshare(1).
set -u
build=$(realpath "${1:-build}")
from=${2:-0}
to=${3:-1200}
step=${4:-16}
demo="$build/examples/ckpt-train-demo"
ckpt="$build/cli/ckpt"
[ "$(id -u)" -eq 0 ] || { echo "disk_full_harness: needs root (mount -t tmpfs)" >&2; exit 2; }
work=$(mktemp -d /tmp/ckpt-full-XXXXXX)
trap 'rm -rf "$work"' EXIT
mkdir "$work/bin" && cp "$demo" "$ckpt" "$work/bin/" || exit 2  # immune to a rebuild meanwhile
demo="$work/bin/ckpt-train-demo"
ckpt="$work/bin/ckpt"
digest() { sed -n 's/^final_params_xxh3 //p' | tail -1; }
"$demo" --run-dir "$work/seed" --steps 80 --save-every 20 --stop-at 60 --keep-last 1 >/dev/null
rm -rf "$work/seed/profile"
[ "${CKPT_HARNESS_KEEP_SPARE:-0}" = 1 ] || rm -rf "$work/seed/.spare"
ref=$("$demo" --run-dir "$work/ref" --steps 80 --save-every 20 | digest)

# One level, inside the namespace: prints "rc tmp_left verify_rc resumed_digest first_error".
level() {
  unshare -m bash -c '
    set -u; m=$1; free=$2; demo=$3; ckpt=$4; seed=$5
    mkdir -p "$m" && mount -t tmpfs -o size=4m none "$m" || exit 9
    cp -r "$seed" "$m/run"
    avail=$(df -k --output=avail "$m" | tail -1)
    fill=$((avail - free))
    [ $fill -gt 0 ] && dd if=/dev/zero of="$m/filler" bs=1K count=$fill status=none 2>/dev/null
    out=$("$demo" --run-dir "$m/run" --steps 80 --save-every 20 2>&1); rc=$?
    tmp=$(find "$m/run" -name "*.tmp" | wc -l)
    rm -f "$m/filler"
    "$ckpt" verify "$m/run" >/dev/null 2>&1; vrc=$?
    got=$("$demo" --run-dir "$m/run" --steps 80 --save-every 20 2>&1 | sed -n "s/^final_params_xxh3 //p")
    err=$(echo "$out" | grep -m1 "ckpt-train-demo:" | cut -c1-140)
    echo "$rc $tmp $vrc ${got:-none} $err"
  ' _ "$work/mnt" "$1" "$demo" "$ckpt" "$work/seed"
}

tried=0 bad=0 failed_cleanly=0 succeeded=0
for ((free = from; free <= to; free += step)); do
  read -r rc tmp vrc got err <<<"$(level $free)"
  tried=$((tried + 1))
  verdict=ok
  if [ "$rc" -ge 128 ] || [ "$tmp" -ne 0 ] || [ "$vrc" -ne 0 ] || [ "$got" != "$ref" ]; then
    verdict=BAD; bad=$((bad + 1))
  elif [ "$rc" -eq 0 ]; then
    succeeded=$((succeeded + 1))
  else
    failed_cleanly=$((failed_cleanly + 1))
  fi
  echo "free=${free}KiB exit=$rc tmp_left=$tmp verify=$vrc resumed_exact=$([ "$got" = "$ref" ] && echo yes || echo no) $verdict ${err:-}"
done
echo "disk-full levels tried: $tried, saved: $succeeded, failed with one line: $failed_cleanly, bad: $bad"
[ $bad -eq 0 ]
