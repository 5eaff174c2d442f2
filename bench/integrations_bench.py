"""Save stall and resume time of ckpt's framework integrations against each framework's own
checkpointing, on the same model in the same run of this program, interleaved (CPU, one
process):

- hf: ckpt.integrations.hf.CkptCallback (non-blocking) against the Trainer's checkpoint-N
  folders (safetensors, optimizer.pt, scheduler.pt, rng_state.pth); a GPT-2 of 2 layers,
  n_embd 512: about 6.4 M parameters, a 77 MB checkpoint with AdamW's moments;
- lightning: Trainer(plugins=[CkptIO()]) (non-blocking) against Lightning's own .ckpt
  (TorchCheckpointIO, torch.save); an MLP of width 2048 with one hidden layer: 4.2 M
  parameters, 50 MB with AdamW's moments;
- accelerate: ckpt.integrations.accelerate.save_state(blocking=False) against
  Accelerator.save_state (safetensors, optimizer.bin, scheduler.bin, random_states_0.pkl); the
  same MLP.

    PYTHONPATH=build/python bench/integrations_bench.py --python VENV_PYTHON [--framework all]
        [--reps 3]

Each repetition runs, for ckpt and for the framework (their order alternating), one run of 12
optimizer steps saving every 3 (the stall: the time each save keeps the training thread —
the Trainer's _save_checkpoint or ckpt's save for hf, trainer.save_checkpoint for lightning,
the save_state call for accelerate), then a run killed after step 10 and resumed from step 9
(the resume time: from train()/fit()/before load_state to the first batch, minus the same for a
fresh start). Prints the median and the range of every figure over all saves / repetitions.
The training scripts are python/tests/integrations/*_train.py; --python names the interpreter
with transformers, lightning and accelerate (python/tests/integrations/conftest.py makes one
under the build tree)."""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
HERE = ROOT / "python" / "tests" / "integrations"
MLP = ["--width", "2048", "--hidden-layers", "1"]
# framework: (script, its own mode, model and cadence, ckpt-only flags, resume flag per mode)
FRAMEWORKS = {
    "hf": ("hf_train.py", "hf", ["--n-embd", "512", "--save-steps", "3"], [],
           {"ckpt": [], "hf": ["--resume"]}),
    "lightning": ("lightning_train.py", "own", MLP + ["--save-steps", "3"], [],
                  {"ckpt": ["--resume"], "own": ["--resume"]}),
    "accelerate": ("accelerate_train.py", "own", MLP, ["--non-blocking"],
                   {"ckpt": [], "own": []}),
}
LABEL = {"hf": "HF Trainer", "lightning": "Lightning", "accelerate": "Accelerate"}


def run(python, script, out, mode, *extra, expect=0):
    env = dict(os.environ, OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1")
    env.setdefault("PYTHONPATH", str(ROOT / "build" / "python"))
    p = subprocess.run([python, str(HERE / script), "--mode", mode, "--out", str(out), *extra],
                       env=env, capture_output=True, text=True)
    if p.returncode != expect:
        sys.exit(f"integrations_bench: {script} {mode} exited {p.returncode}:\n"
                 f"{p.stderr[-3000:]}")
    return json.loads((out / "result.json").read_text()) if expect == 0 else None


def measure(python, framework, mode, tmp):
    script, _, size, ckpt_only, resume = FRAMEWORKS[framework]
    args = [*size, "--max-steps", "12", *(ckpt_only if mode == "ckpt" else [])]
    full = run(python, script, tmp / "full", mode, *args)
    run(python, script, tmp / "resumed", mode, *args, "--kill-at", "10", expect=-9)
    resumed = run(python, script, tmp / "resumed", mode, *args, *resume[mode])
    return full["save_stalls"], resumed["to_first_step"] - full["to_first_step"]


def spread(values):
    return f"{statistics.median(values):.3f} ({min(values):.3f}-{max(values):.3f})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--framework", choices=["all", *FRAMEWORKS], default="all")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    names = list(FRAMEWORKS) if a.framework == "all" else [a.framework]
    results = {n: {"ckpt": ([], []), FRAMEWORKS[n][1]: ([], [])} for n in names}
    with tempfile.TemporaryDirectory() as tmp:
        for rep in range(a.reps):
            for n in names:
                modes = ["ckpt", FRAMEWORKS[n][1]]
                for mode in modes if rep % 2 == 0 else modes[::-1]:
                    stalls, resume = measure(a.python, n, mode,
                                             pathlib.Path(tmp) / f"{n}-{mode}-{rep}")
                    results[n][mode][0].extend(stalls)
                    results[n][mode][1].append(resume)
    print(f"CPU, one process; {a.reps} repetitions, interleaved; seconds, median (range)")
    print(f"{'framework':12}{'what':30}{'ckpt':>24}{'its own':>24}{'ratio':>8}")
    for n in names:
        (cs, cr), (os_, or_) = results[n]["ckpt"], results[n][FRAMEWORKS[n][1]]
        for what, c, o in (("save stall (every save)", cs, os_),
                           ("resume - fresh start", cr, or_)):
            mc, mo = statistics.median(c), statistics.median(o)
            ratio = f"{mo / mc:7.1f}x" if mc > 0 else "    n/a"
            print(f"{LABEL[n]:12}{what:30}{spread(c):>24}{spread(o):>24}{ratio}")
    print("(resume: train()/fit()/before load_state to the first batch of the resumed run, "
          "minus the same for a fresh start)")


if __name__ == "__main__":
    main()
