"""A training job for test_s3_faults.py: a model of --mb MB whose parameters after step k are a
pure function of k (so any restore can be checked), saved to an s3:// run directory.

  s3_fault_job.py RUN --steps 1,2,3 [--mb 24] [--salt N] [--ready FILE --go FILE]

Restores the newest committed checkpoint (prints "restored K" or "fresh"), checks that the
parameters are step K's, then for each step: sets step k's parameters and saves (prints
"saved k"). With --ready/--go it creates FILE --ready once the Checkpointer holds the run and
waits for --go to exist before the first save (a job the test can pause at a known point)."""
import argparse
import os
import sys
import time

import torch

import ckpt


def params_of(step, model, salt=0):
    g = torch.Generator().manual_seed(1000 + step + 1000003 * salt)
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=g))


def main():
    a = argparse.ArgumentParser()
    a.add_argument("run")
    a.add_argument("--steps", default="1")
    a.add_argument("--mb", type=int, default=24)
    a.add_argument("--ready", default="")
    a.add_argument("--go", default="")
    a.add_argument("--salt", type=int, default=0, help="another job's parameters for each step")
    o = a.parse_args()
    rows = max(1, o.mb * (1 << 20) // (1024 * 4))
    model = torch.nn.Linear(1024, rows, bias=False)
    with ckpt.Checkpointer(o.run, keep_last=10) as ck:
        ck.track(model=model)
        got = ck.restore_latest()
        step = got.step if got.restored else None
        if step is None:
            print("fresh", flush=True)
        else:
            want = torch.nn.Linear(1024, rows, bias=False)
            params_of(step, want, o.salt)
            if not torch.equal(want.weight, model.weight):
                sys.exit(f"restored step {step} but its parameters are not step {step}'s")
            print(f"restored {step}", flush=True)
        if o.ready:
            open(o.ready, "w").close()
        while o.go and not os.path.exists(o.go):
            time.sleep(0.05)
        for k in (int(s) for s in o.steps.split(",") if s):
            params_of(k, model, o.salt)
            ck.save(k)
            print(f"saved {k}", flush=True)


if __name__ == "__main__":
    main()
