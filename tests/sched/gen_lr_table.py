#!/usr/bin/python3
"""Writes tests/sched/data/lr_table.json: expected LRs per step for ckpt's closed-form schedules.

Run with Debian's /usr/bin/python3 (torch 1.13):  /usr/bin/python3 tests/sched/gen_lr_table.py

Where torch has the scheduler (StepLR, MultiStepLR, ExponentialLR, OneCycleLR) the values are what
torch reports through get_last_lr() while stepping a real SGD optimizer, i.e. the values a torch run
sees. The warmup schedules are torch LambdaLR with the multiplier functions of Hugging Face
transformers' optimization.py (get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup /
get_cosine_with_min_lr_schedule_with_warmup, get_linear_schedule_with_warmup,
get_polynomial_decay_schedule_with_warmup) and fairseq's inverse_sqrt, transcribed here, with
min_lr handled as transformers' min_lr_rate: factor * (1 - min_lr/base) + min_lr/base.
"""
import json
import math
import os
import sys

import torch
from torch.optim.lr_scheduler import ExponentialLR, LambdaLR, MultiStepLR, OneCycleLR, StepLR


def run(spec, make, steps):
    param = torch.nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([param], lr=spec.get("base_lr", 0.1), momentum=0.9)
    sched = make(opt)
    lrs = [sched.get_last_lr()[0]]
    for _ in range(steps):
        opt.step()
        sched.step()
        lrs.append(sched.get_last_lr()[0])
    return lrs


def warmup_factor(step, warmup):
    return float(step) / float(max(1, warmup))


def cosine_lambda(warmup, total, min_rate):
    def f(step):
        if step < warmup:
            return warmup_factor(step, warmup)
        progress = float(step - warmup) / float(max(1, total - warmup))
        progress = min(progress, 1.0)  # ckpt holds min_lr past total_steps
        factor = 0.5 * (1.0 + math.cos(math.pi * 2.0 * 0.5 * progress))
        return factor * (1 - min_rate) + min_rate
    return f


def linear_lambda(warmup, total, min_rate):
    def f(step):
        if step < warmup:
            return warmup_factor(step, warmup)
        factor = max(0.0, float(total - step) / float(max(1, total - warmup)))
        return factor * (1 - min_rate) + min_rate
    return f


def poly_lambda(base, warmup, total, lr_end, power):
    def f(step):
        if step < warmup:
            return warmup_factor(step, warmup)
        if step > total:
            return lr_end / base
        lr_range = base - lr_end
        decay_steps = total - warmup
        pct_remaining = 1 - (step - warmup) / decay_steps
        return (lr_range * pct_remaining ** power + lr_end) / base
    return f


def constant_lambda(warmup):
    return lambda step: warmup_factor(step, warmup) if step < warmup else 1.0


def inverse_sqrt_lambda(warmup):
    # fairseq inverse_sqrt with warmup_init_lr = 0: lr * sqrt(warmup) / sqrt(step) after warmup.
    def f(step):
        if step < warmup:
            return warmup_factor(step, warmup)
        return math.sqrt(max(1, warmup)) / math.sqrt(max(1, step))
    return f


def cases():
    out = []

    def add(name, spec, make, steps):
        out.append({"name": name, "spec": spec, "lrs": run(spec, make, steps)})

    s = {"kind": "step", "base_lr": 0.1, "step_size": 7, "gamma": 0.5}
    add("StepLR", s, lambda o: StepLR(o, step_size=7, gamma=0.5), 60)
    s = {"kind": "step", "base_lr": 0.05, "step_size": 1, "gamma": 0.9}
    add("StepLR every step", s, lambda o: StepLR(o, step_size=1, gamma=0.9), 40)
    s = {"kind": "multistep", "base_lr": 0.1, "milestones": [5, 12, 12, 30], "gamma": 0.3}
    add("MultiStepLR repeated milestone", s,
        lambda o: MultiStepLR(o, milestones=[5, 12, 12, 30], gamma=0.3), 45)
    s = {"kind": "multistep", "base_lr": 0.2, "milestones": [0, 3], "gamma": 0.1}
    add("MultiStepLR milestone 0", s, lambda o: MultiStepLR(o, milestones=[0, 3], gamma=0.1), 8)
    s = {"kind": "exponential", "base_lr": 0.3, "gamma": 0.97}
    add("ExponentialLR", s, lambda o: ExponentialLR(o, gamma=0.97), 150)
    for total, pct, div, fdiv in [(100, 0.3, 25.0, 1e4), (37, 0.25, 10.0, 100.0),
                                  (50, 0.0, 25.0, 1e4), (10, 0.55, 5.0, 50.0), (1, 0.3, 25.0, 1e4)]:
        s = {"kind": "one_cycle", "max_lr": 0.8, "total_steps": total, "pct_start": pct,
             "div_factor": div, "final_div_factor": fdiv}
        add(f"OneCycleLR T={total} pct={pct}", s,
            lambda o, total=total, pct=pct, div=div, fdiv=fdiv: OneCycleLR(
                o, max_lr=0.8, total_steps=total, pct_start=pct, div_factor=div,
                final_div_factor=fdiv, anneal_strategy="cos", three_phase=False),
            total)
    for warmup, total, min_lr in [(10, 100, 0.0), (7, 40, 1e-4), (0, 25, 0.0)]:
        base = 3e-4
        s = {"kind": "warmup_cosine", "base_lr": base, "warmup_steps": warmup,
             "total_steps": total, "min_lr": min_lr}
        add(f"cosine W={warmup} T={total} min={min_lr}", s,
            lambda o, w=warmup, t=total, m=min_lr / base: LambdaLR(o, cosine_lambda(w, t, m)),
            total + 10)
        s = dict(s, kind="warmup_linear")
        add(f"linear W={warmup} T={total} min={min_lr}", s,
            lambda o, w=warmup, t=total, m=min_lr / base: LambdaLR(o, linear_lambda(w, t, m)),
            total + 10)
        for power in [1.0, 2.0, 0.5]:
            s = dict(s, kind="warmup_poly", power=power)
            add(f"poly W={warmup} T={total} min={min_lr} p={power}", s,
                lambda o, w=warmup, t=total, e=min_lr, p=power: LambdaLR(
                    o, poly_lambda(base, w, t, e, p)),
                total + 10)
    for warmup in [0, 8]:
        s = {"kind": "constant", "base_lr": 0.01, "warmup_steps": warmup}
        add(f"constant W={warmup}", s, lambda o, w=warmup: LambdaLR(o, constant_lambda(w)), 20)
        s = {"kind": "inverse_sqrt", "base_lr": 5e-4, "warmup_steps": warmup}
        add(f"inverse_sqrt W={warmup}", s, lambda o, w=warmup: LambdaLR(o, inverse_sqrt_lambda(w)),
            60)
    return out


def main():
    table = {
        "generator": "tests/sched/gen_lr_table.py",
        "torch_version": torch.__version__,
        "python_version": sys.version.split()[0],
        "cases": cases(),
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "lr_table.json")
    with open(path, "w") as f:
        # One case per line keeps the file small and its diffs readable.
        header = {k: v for k, v in table.items() if k != "cases"}
        f.write(json.dumps(header)[:-1] + ', "cases": [\n')
        f.write(",\n".join(json.dumps(c) for c in table["cases"]))
        f.write("\n]}\n")
    print(f"wrote {path}: {len(table['cases'])} cases")


if __name__ == "__main__":
    main()
