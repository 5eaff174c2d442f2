"""What the S3 benchmarks share (s3_bench.py, s3_dcp_bench.py, s3_ranks_bench.py): a SeaweedFS of
their own on loopback (scripts/s3-server.sh), peer libraries from PyPI into a folder of the build,
and the table of medians they print."""
import os
import pathlib
import statistics
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
BUILD = pathlib.Path(os.environ.get("CKPT_BUILD_DIR", ROOT / "build"))
SERVER = ROOT / "scripts" / "s3-server.sh"


def start_server(dir_):
    """Starts the server with its data in dir_; its AWS_* variables go into os.environ."""
    subprocess.run(["bash", str(SERVER), "start", str(dir_)], check=True)
    env = {}
    for line in (dir_ / "env").read_text().splitlines():
        k, v = line.removeprefix("export ").split("=", 1)
        env[k] = v
    os.environ.update(env)
    return env


def stop_server(dir_):
    subprocess.run(["bash", str(SERVER), "stop", str(dir_)])


def pip_target(folder, spec, probe):
    """`spec` installed with this interpreter's pip into <build>/folder (once: when `probe` is
    not there yet), which joins sys.path."""
    target = BUILD / folder
    if not (target / probe).exists():
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target),
                        spec], check=True)
    sys.path.append(str(target))


def print_medians(rows, mb):
    """One line per measured thing: median seconds and MB/s, then each round. Returns medians."""
    med = {k: statistics.median(v) for k, v in rows.items()}
    width = max(len(k) for k in rows)
    for k, v in rows.items():
        print(f"  {k:{width}s}  median {med[k]:6.2f} s  {mb / med[k]:7.1f} MB/s   "
              f"rounds {' '.join(f'{x:.2f}' for x in v)}")
    return med
