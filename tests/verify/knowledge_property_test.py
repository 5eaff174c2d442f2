"""Property test over generated state dicts (issue 24): for every torch optimizer class and
scheduler class the auditor's knowledge table lists that this torch has, a checkpoint saved by
torch.save after N steps audits with the optimizer and scheduler `present` (exit 0); the same
checkpoint without the optimizer reports it `missing`, and without the scheduler reports it
`missing` (exit 2).

    /usr/bin/python3 tests/verify/knowledge_property_test.py build/cli/ckpt

Exits 77 (ctest SKIP_RETURN_CODE) when torch cannot be imported.
"""
import json
import os
import random
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.optim import lr_scheduler as L
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)

CKPT = sys.argv[1]
O = torch.optim

OPTIMIZERS = {
    "SGD": lambda p: O.SGD(p, lr=0.1),
    "SGD momentum": lambda p: O.SGD(p, lr=0.1, momentum=0.9),
    "SGD nesterov": lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    "Adam": lambda p: O.Adam(p, lr=1e-2),
    "Adam amsgrad": lambda p: O.Adam(p, lr=1e-2, amsgrad=True),
    "AdamW": lambda p: O.AdamW(p, lr=1e-2),
    "Adamax": lambda p: O.Adamax(p, lr=1e-2),
    "NAdam": lambda p: O.NAdam(p, lr=1e-2),
    "RAdam": lambda p: O.RAdam(p, lr=1e-2),
    "Adagrad": lambda p: O.Adagrad(p, lr=1e-2),
    "Adadelta": lambda p: O.Adadelta(p, lr=1.0),
    "RMSprop": lambda p: O.RMSprop(p, lr=1e-2),
    "RMSprop centered momentum": lambda p: O.RMSprop(p, lr=1e-2, momentum=0.9, centered=True),
    "Rprop": lambda p: O.Rprop(p, lr=1e-2),
    "ASGD": lambda p: O.ASGD(p, lr=1e-2),
    "LBFGS": lambda p: O.LBFGS(p, lr=0.1, max_iter=2),
}
if hasattr(O, "Adafactor"):
    OPTIMIZERS["Adafactor"] = lambda p: O.Adafactor(p, lr=1e-2)

N = 6
SCHEDULERS = {
    "StepLR": lambda o: L.StepLR(o, step_size=2),
    "MultiStepLR": lambda o: L.MultiStepLR(o, milestones=[2, 4]),
    "ExponentialLR": lambda o: L.ExponentialLR(o, gamma=0.9),
    "CosineAnnealingLR": lambda o: L.CosineAnnealingLR(o, T_max=10),
    "CosineAnnealingWarmRestarts": lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3),
    "LambdaLR": lambda o: L.LambdaLR(o, lambda s: 1.0 / (1 + s)),
    "LinearLR": lambda o: L.LinearLR(o, start_factor=0.5, total_iters=4),
    "ConstantLR": lambda o: L.ConstantLR(o, factor=0.5, total_iters=3),
    "OneCycleLR": lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=20, cycle_momentum=False),
    "CyclicLR": lambda o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                     cycle_momentum=False),
    "SequentialLR": lambda o: L.SequentialLR(
        o, [L.LinearLR(o, start_factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9)],
        milestones=[2]),
}
if hasattr(L, "PolynomialLR"):
    SCHEDULERS["PolynomialLR"] = lambda o: L.PolynomialLR(o, total_iters=10, power=2.0)


def checkpoint(make_opt, make_sched):
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    m = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    opt = make_opt(m.parameters())
    sch = make_sched(opt)
    x, y = torch.randn(32, 4), torch.randn(32, 2)
    for k in range(N):
        i = (k % 4) * 8

        def closure():
            opt.zero_grad()
            loss = nn.functional.mse_loss(m(x[i:i + 8]), y[i:i + 8])
            loss.backward()
            return loss

        opt.step(closure)
        sch.step()
    return {"model": m.state_dict(), "optimizer": opt.state_dict(), "scheduler": sch.state_dict(),
            "rng": {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(),
                    "python": random.getstate()},
            "loader": {"epoch": N // 4, "batch_idx": N % 4, "samples_seen": N * 8},
            "global_step": N, "epoch": N // 4}


def audit(path):
    r = subprocess.run([CKPT, "audit", "--json", path], capture_output=True, text=True)
    return r.returncode, {k: v for k, v in json.loads(r.stdout)["components"].items()}


failures = []
cases = 0
with tempfile.TemporaryDirectory() as tmp:
    combos = [(o, "CosineAnnealingLR") for o in OPTIMIZERS] + [("AdamW", s) for s in SCHEDULERS]
    for oname, sname in combos:
        cases += 1
        d = checkpoint(OPTIMIZERS[oname], SCHEDULERS[sname])
        p = os.path.join(tmp, "c.pt")
        try:
            torch.save(d, p)
        except TypeError as e:  # torch 1.13's CyclicLR state_dict holds a WeakMethod
            print(f"  skip {oname} + {sname}: torch.save fails ({e})")
            cases -= 1
            continue
        rc, comps = audit(p)
        ok = rc == 0 and comps["optimizer"]["status"] == "present" and \
            comps["scheduler"]["status"] == "present"
        if not ok:
            failures.append(f"{oname} + {sname}: exit {rc}, optimizer "
                            f"{comps['optimizer']['status']} ({comps['optimizer']['evidence']}), "
                            f"scheduler {comps['scheduler']['status']} "
                            f"({comps['scheduler']['evidence']})")
        for drop in ("optimizer", "scheduler"):
            e = dict(d)
            del e[drop]
            torch.save(e, p)
            rc, comps = audit(p)
            if rc != 2 or comps[drop]["status"] != "missing":
                failures.append(f"{oname} + {sname} without {drop}: exit {rc}, "
                                f"{drop} {comps[drop]['status']} ({comps[drop]['evidence']})")
print(f"knowledge property: {cases} optimizer/scheduler checkpoints (torch {torch.__version__}), "
      f"each also without its optimizer and without its scheduler: {len(failures)} failure(s)")
for f in failures:
    print("  FAIL", f)
sys.exit(1 if failures else 0)
