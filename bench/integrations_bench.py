"""Save stall and resume time of ckpt.integrations.hf.CkptCallback against the Trainer's own
checkpoint-N folders, on the same model in the same run of this program (a GPT-2 of 2 layers,
n_embd 512 by default: about 6.4 M parameters, a 77 MB checkpoint with AdamW's moments; CPU).

    PYTHONPATH=build/python VENV_PYTHON bench/integrations_bench.py [--n-embd 512] [--python P]

For each of ckpt and the Trainer: one run of 12 optimizer steps saving every 3 (the stall is the
time each save keeps the training thread: ckpt's non-blocking snapshot, the Trainer's
_save_checkpoint with safetensors, optimizer.pt, scheduler.pt and rng_state.pth), then a run
killed after step 10 and resumed (the resume time is from train() to the first step: ckpt's
verified restore, the Trainer's loading and its skipping of the epoch's trained batches).
Prints the medians and the ratios. python/tests/integrations/hf_train.py is the training script;
--python names the interpreter with transformers (python/tests/integrations/conftest.py makes
one under the build tree)."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "python" / "tests" / "integrations" / "hf_train.py"


def run(python, out, mode, *extra, expect=0):
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.setdefault("PYTHONPATH", str(ROOT / "build" / "python"))
    p = subprocess.run([python, str(SCRIPT), "--mode", mode, "--out", str(out), *extra],
                       env=env, capture_output=True, text=True)
    if p.returncode != expect:
        sys.exit(f"integrations_bench: {mode} run exited {p.returncode}:\n{p.stderr[-3000:]}")
    return json.loads((out / "result.json").read_text()) if expect == 0 else None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--n-embd", default="512")
    a = ap.parse_args()
    size = ["--n-embd", a.n_embd, "--max-steps", "12", "--save-steps", "3"]
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("ckpt", "hf"):
            d = pathlib.Path(tmp) / mode
            full = run(a.python, d / "full", mode, *size)
            run(a.python, d / "resumed", mode, *size, "--kill-at", "10", expect=-9)
            resumed = run(a.python, d / "resumed", mode, *size,
                          *(["--resume"] if mode == "hf" else []))
            fresh = full["to_first_step"]
            rows[mode] = {"stall": statistics.median(full["save_stalls"]),
                          "resume": resumed["to_first_step"] - fresh, "fresh_start": fresh}
    c, h = rows["ckpt"], rows["hf"]
    print(f"model: GPT-2, 2 layers, n_embd {a.n_embd}; 4 saves per run; CPU")
    print(f"{'':28}{'ckpt':>12}{'HF Trainer':>14}{'ratio':>10}")
    print(f"{'save stall (median, s)':28}{c['stall']:12.4f}{h['stall']:14.4f}"
          f"{h['stall'] / c['stall']:9.1f}x")
    print(f"{'resume - fresh start (s)':28}{c['resume']:12.4f}{h['resume']:14.4f}"
          f"{h['resume'] / c['resume'] if c['resume'] > 0 else float('nan'):9.1f}x")
    print("(resume: train() to the first step of the resumed run, minus the same for a fresh "
          "start)")


if __name__ == "__main__":
    main()
