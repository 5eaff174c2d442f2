"""Property test over generated state dicts (issue 24): for every row of the auditor's knowledge
tables (verify/formats/knowledge.cc: optimizer_classes(), scheduler_classes()) that the
interpreter at hand can produce on a CPU, a checkpoint saved by torch.save after N steps audits
with the optimizer and the scheduler `present` and identified as that row (exit 0); the same
checkpoint without its optimizer reports it `missing`, and without its scheduler reports it
`missing` (exit 2). At the end it prints every table row, exercised (by which classes) or not
(and why), so the coverage is visible.

    PYTHON tests/verify/knowledge_property_test.py CKPT [--interpreter torch2|integrations]
        [--build-dir DIR] [--only LIB,...]

Each row is produced by its own library's class: torch's whole torch.optim and
torch.optim.lr_scheduler (a class of either module without a case here fails the test: a new
class needs a row and a case), SWALR, ZeroRedundancyOptimizer (one gloo rank), and, when
importable, timm's optimizers and schedulers, transformers' Adafactor and schedule functions,
bitsandbytes' optimizers (CPU backend), DeepSpeed's CPU Adam and FusedAdam (CPU op builder) and
mmengine's param schedulers. --interpreter runs the test under the named venv, found as the
Python tests find theirs: torch2 is $CKPT_TORCH2_PYTHON or BUILD/python/torch2-venv
(scripts/torch2-venv.sh), integrations is $CKPT_INTEGRATIONS_PYTHON or
BUILD/python/integrations-venv (python/tests/integrations/fw_venv.py); BUILD is $CKPT_BUILD_DIR,
--build-dir, or <source>/build. Exits 77 (ctest SKIP_RETURN_CODE) in one line when the
interpreter, or torch in it, is absent.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
VENVS = {"torch2": ("CKPT_TORCH2_PYTHON", "torch2-venv", "scripts/torch2-venv.sh"),
         "integrations": ("CKPT_INTEGRATIONS_PYTHON", "integrations-venv",
                          "python/tests/integrations/fw_venv.py")}


def args_of(argv):
    out = {"ckpt": argv[1], "interpreter": None, "build_dir": None, "only": None}
    i = 2
    while i + 1 < len(argv):
        out[argv[i].lstrip("-").replace("-", "_")] = argv[i + 1]
        i += 2
    return out


def reexec_under(name, build_dir):
    env_var, venv, maker = VENVS[name]
    named = os.environ.get(env_var)
    builds = [os.environ.get("CKPT_BUILD_DIR"), build_dir, os.path.join(ROOT, "build")]
    found = [named] if named else [os.path.join(b, "python", venv, "bin", "python")
                                   for b in builds if b]
    for py in found:
        if os.path.exists(py):
            argv = [a for a in sys.argv if a not in ("--interpreter", name)]
            os.execv(py, [py] + argv)
    print(f"skip: no {name} python ({env_var} unset, no {venv} under {', '.join(b for b in builds if b)};"
          f" {maker} makes it)")
    sys.exit(77)


A = args_of(sys.argv)
if A["interpreter"]:
    reexec_under(A["interpreter"], A["build_dir"])

try:
    import numpy as np
    import torch
    from torch import nn
    from torch.optim import lr_scheduler as L
except ImportError as e:  # pragma: no cover
    print(f"skip: {sys.executable}: {e}")
    sys.exit(77)

O = torch.optim
N = 6  # optimizer steps, 4 per epoch
ONLY = set(A["only"].split(",")) if A["only"] else None
TV = tuple(int(x) for x in re.findall(r"\d+", torch.__version__)[:2])


def optional(module):
    """The module, or the reason it is not here."""
    try:
        return __import__(module, fromlist=["_"]), None
    except Exception as e:  # noqa: BLE001 - any failure to import: not here
        return None, f"{module} not importable in {sys.executable} ({type(e).__name__})"


os.environ.setdefault("DS_ACCELERATOR", "cpu")
timm, timm_why = optional("timm.optim")
timm_sched, _ = optional("timm.scheduler")
tf_opt, tf_why = optional("transformers.optimization")
bnb, bnb_why = optional("bitsandbytes")
ds_adam, ds_why = optional("deepspeed.ops.adam") if os.environ.get("CKPT_TEST_DEEPSPEED") \
    else (None, "deepspeed not asked for (CKPT_TEST_DEEPSPEED=1 builds its CPU ops, minutes)")
mm_sched, mm_why = optional("mmengine.optim.scheduler")

# Rows that no CPU here can produce, with what was tried (fixtures/foreign/knowledge/README.md).
NO_CPU = {"FusedAdam (apex)": "apex.optimizers.FusedAdam needs CUDA ('requires cuda extensions' "
                              "without amp_C, a cuda buffer with it); checked by hand in "
                              "tests/verify/knowledge_test.cc"}


def mlp(bias=True):
    return nn.Sequential(nn.Linear(4, 8, bias=bias), nn.ReLU(), nn.Linear(8, 2, bias=bias))


class Case:
    def __init__(self, label, row, make, lib="torch", model=mlp, sched="cos", zero=False):
        self.label, self.row, self.make, self.lib = label, row, make, lib
        self.model, self.sched, self.zero = model, sched, zero


class Sched:
    """A scheduler case: `make(opt)`; `step(s, k, loss)` after each optimizer step k (0-based);
    `per` "step", or "epoch" (stepped after every 4th step with the epoch count)."""

    def __init__(self, label, row, make, lib="torch", step=None, per="step"):
        self.label, self.row, self.make, self.lib, self.per = label, row, make, lib, per
        self.step = step or (lambda s, k, loss: s.step())


def torch_optimizers():
    c = [Case("SGD", "SGD", lambda p: O.SGD(p, lr=0.1)),
         Case("SGD(momentum=0.9)", "SGD", lambda p: O.SGD(p, lr=0.1, momentum=0.9)),
         Case("SGD(nesterov=True)", "SGD",
              lambda p: O.SGD(p, lr=0.1, momentum=0.9, nesterov=True)),
         Case("Adam", "Adam/AdamW", lambda p: O.Adam(p, lr=1e-2)),
         Case("Adam(amsgrad=True)", "Adam/AdamW", lambda p: O.Adam(p, lr=1e-2, amsgrad=True)),
         Case("AdamW", "Adam/AdamW", lambda p: O.AdamW(p, lr=1e-2)),
         Case("Adamax", "Adamax", lambda p: O.Adamax(p, lr=1e-2)),
         Case("NAdam", "NAdam", lambda p: O.NAdam(p, lr=1e-2)),
         Case("RAdam", "RAdam", lambda p: O.RAdam(p, lr=1e-2)),
         Case("Adagrad", "Adagrad", lambda p: O.Adagrad(p, lr=1e-2)),
         Case("Adadelta", "Adadelta", lambda p: O.Adadelta(p, lr=1.0)),
         Case("RMSprop", "RMSprop", lambda p: O.RMSprop(p, lr=1e-2)),
         Case("RMSprop(centered, momentum)", "RMSprop",
              lambda p: O.RMSprop(p, lr=1e-2, momentum=0.9, centered=True)),
         Case("Rprop", "Rprop", lambda p: O.Rprop(p, lr=1e-2)),
         Case("ASGD", "ASGD", lambda p: O.ASGD(p, lr=1e-2)),
         Case("LBFGS", "LBFGS", lambda p: O.LBFGS(p, lr=0.1, max_iter=2)),
         Case("SparseAdam (nn.Embedding(sparse=True))", "SparseAdam",
              lambda p: O.SparseAdam(list(p), lr=1e-2),
              model=lambda: nn.Sequential(nn.Embedding(16, 2, sparse=True))),
         Case("ZeroRedundancyOptimizer(AdamW), 1 gloo rank", "Adam/AdamW", None, zero=True)]
    if hasattr(O, "Adafactor"):
        c.append(Case("Adafactor", "Adafactor", lambda p: O.Adafactor(p, lr=1e-2)))
    if hasattr(O, "Muon"):  # 2-D parameters only
        c.append(Case("Muon", "Muon", lambda p: O.Muon(p, lr=1e-2), model=lambda: mlp(False)))
    if TV >= (2, 4):
        c.append(Case("AdamW(fused=True)", "Adam/AdamW",
                      lambda p: O.AdamW(p, lr=1e-2, fused=True)))
    return c


def library_optimizers():
    c = []
    if timm:
        c += [Case("timm Lion", "Lion", lambda p: timm.Lion(p, lr=1e-3), "timm"),
              Case("timm Lamb", "LAMB", lambda p: timm.Lamb(p, lr=1e-3), "timm"),
              Case("timm Lars(momentum=0.9)", "LARS",
                   lambda p: timm.Lars(p, lr=0.1, momentum=0.9), "timm"),
              Case("timm AdaBelief", "AdaBelief", lambda p: timm.AdaBelief(p, lr=1e-3), "timm"),
              Case("timm AdamP", "AdamP", lambda p: timm.AdamP(p, lr=1e-3), "timm"),
              Case("timm MADGRAD", "MADGRAD", lambda p: timm.MADGRAD(p, lr=1e-3), "timm")]
    if tf_opt:
        c += [Case("transformers Adafactor(lr=1e-3)", "Adafactor (transformers)",
                   lambda p: tf_opt.Adafactor(p, lr=1e-3, relative_step=False,
                                              scale_parameter=False, warmup_init=False),
                   "transformers"),
              Case("transformers Adafactor(relative_step=True)",
                   "Adafactor (transformers)", lambda p: tf_opt.Adafactor(p, lr=None),
                   "transformers", sched="adafactor")]
    if bnb:
        for name, row, kw in (("AdamW8bit", "bitsandbytes Adam/AdamW (8-bit, two-state)", {}),
                              ("Adam8bit", "bitsandbytes Adam/AdamW (8-bit, two-state)", {}),
                              ("Lion8bit", "bitsandbytes 8-bit", {}),
                              ("SGD8bit", "bitsandbytes 8-bit", {"momentum": 0.9})):
            cls = getattr(bnb.optim, name)
            c.append(Case(f"bitsandbytes {name} (CPU)", row,
                          lambda p, cls=cls, kw=kw: cls(p, lr=1e-3, min_8bit_size=16, **kw),
                          "bitsandbytes"))
    if ds_adam:
        c += [Case("DeepSpeedCPUAdam", "DeepSpeedCPUAdam",
                   lambda p: ds_adam.DeepSpeedCPUAdam(p, lr=1e-2), "deepspeed"),
              Case("DeepSpeed FusedAdam (CPU op builder)", "FusedAdam (DeepSpeed)",
                   lambda p: ds_adam.FusedAdam(p, lr=1e-2), "deepspeed")]
    return c


def torch_schedulers():
    from torch.optim.swa_utils import SWALR
    s = [Sched("StepLR", "StepLR", lambda o: L.StepLR(o, step_size=2)),
         Sched("MultiStepLR", "MultiStepLR", lambda o: L.MultiStepLR(o, milestones=[2, 4])),
         Sched("ExponentialLR", "ExponentialLR", lambda o: L.ExponentialLR(o, gamma=0.9)),
         Sched("CosineAnnealingLR", "CosineAnnealingLR", lambda o: L.CosineAnnealingLR(o, 10)),
         Sched("CosineAnnealingWarmRestarts", "CosineAnnealingWarmRestarts",
               lambda o: L.CosineAnnealingWarmRestarts(o, T_0=3)),
         Sched("LambdaLR", "LambdaLR", lambda o: L.LambdaLR(o, lambda s: 1.0 / (1 + s))),
         Sched("MultiplicativeLR", "LambdaLR", lambda o: L.MultiplicativeLR(o, lambda s: 0.95)),
         Sched("LinearLR", "LinearLR", lambda o: L.LinearLR(o, start_factor=0.5, total_iters=4)),
         Sched("ConstantLR", "ConstantLR", lambda o: L.ConstantLR(o, factor=0.5, total_iters=3)),
         Sched("PolynomialLR", "PolynomialLR",
               lambda o: L.PolynomialLR(o, total_iters=10, power=2.0)),
         Sched("OneCycleLR", "OneCycleLR",
               lambda o: L.OneCycleLR(o, max_lr=0.1, total_steps=20, cycle_momentum=False)),
         Sched("CyclicLR", "CyclicLR",
               lambda o: L.CyclicLR(o, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                    cycle_momentum=False)),
         Sched("SequentialLR", "SequentialLR", lambda o: L.SequentialLR(
             o, [L.LinearLR(o, start_factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9)],
             milestones=[2])),
         Sched("ChainedScheduler", "ChainedScheduler", lambda o: L.ChainedScheduler(
             [L.LinearLR(o, start_factor=0.5, total_iters=2), L.ExponentialLR(o, gamma=0.9)])),
         Sched("ReduceLROnPlateau (stepped per epoch)", "ReduceLROnPlateau",
               lambda o: L.ReduceLROnPlateau(o, patience=0),
               step=lambda s, k, loss: s.step(loss), per="epoch"),
         Sched("SWALR (torch.optim.swa_utils)", "SWALR",
               lambda o: SWALR(o, swa_lr=0.05, anneal_epochs=2))]
    return s


def library_schedulers():
    s = []
    if tf_opt:
        from transformers import SchedulerType, get_scheduler
        extra = {"cosine_with_min_lr": {"min_lr_rate": 0.1},
                 "cosine_warmup_with_min_lr": {"min_lr_rate": 0.1},
                 "warmup_stable_decay": {"num_decay_steps": 4}}
        for t in SchedulerType:
            plateau = t.value in ("reduce_lr_on_plateau", "greedy")
            s.append(Sched(f"transformers get_scheduler('{t.value}')",
                           "ReduceLROnPlateau" if plateau else "LambdaLR",
                           lambda o, t=t: get_scheduler(
                               t.value, o, num_warmup_steps=2, num_training_steps=20,
                               scheduler_specific_kwargs=extra.get(t.value)),
                           "transformers", step=(lambda s, k, loss: s.step(loss)) if plateau
                           else None))
    if timm_sched:
        for name in ("cosine", "tanh", "step", "multistep", "plateau", "poly"):
            s.append(Sched(f"timm create_scheduler_v2(sched='{name}')", "timm scheduler",
                           lambda o, name=name: timm_sched.create_scheduler_v2(
                               o, sched=name, num_epochs=4, warmup_epochs=1, decay_epochs=1,
                               decay_milestones=[1, 2])[0],
                           "timm", step=lambda s, k, loss: s.step(k // 4 + 1, loss),
                           per="epoch"))
    if mm_sched:
        M = mm_sched
        mk = {"ConstantLR": lambda o: M.ConstantLR(o, factor=0.5, by_epoch=False, end=3),
              "CosineAnnealingLR": lambda o: M.CosineAnnealingLR(o, T_max=10, by_epoch=False),
              "CosineRestartLR": lambda o: M.CosineRestartLR(o, periods=[3, 7],
                                                             restart_weights=[1, 0.5],
                                                             eta_min=0.0, by_epoch=False),
              "ExponentialLR": lambda o: M.ExponentialLR(o, gamma=0.9, by_epoch=False),
              "LinearLR": lambda o: M.LinearLR(o, start_factor=0.5, by_epoch=False, end=4),
              "MultiStepLR": lambda o: M.MultiStepLR(o, milestones=[2, 4], by_epoch=False),
              "OneCycleLR": lambda o: M.OneCycleLR(o, eta_max=0.1, total_steps=20,
                                                   by_epoch=False),
              "PolyLR": lambda o: M.PolyLR(o, power=2.0, by_epoch=False, end=10),
              "StepLR": lambda o: M.StepLR(o, step_size=2, by_epoch=False)}
        for name, make in mk.items():
            s.append(Sched(f"mmengine {name}", "mmengine ParamScheduler", make, "mmengine"))
    return s


def table_rows():
    """(optimizer rows, scheduler rows) of knowledge.cc: [(name, library)], in table order."""
    text = open(os.path.join(ROOT, "verify", "formats", "knowledge.cc")).read()

    def rows(fn):
        body = text[text.index(fn + "() {"):]
        body = body[:body.index("return kRows")]
        seen = []
        # A row opens with its name, its library, then the brace of its next field.
        for name, lib in re.findall(r'\{"([^"]+)",\s*"([^"]+)",\s*\{', body):
            if (name, lib) not in seen:
                seen.append((name, lib))
        return seen
    return rows("optimizer_classes"), rows("scheduler_classes")


def unlisted_torch_classes(opt_cases, sched_cases):
    """torch.optim / lr_scheduler classes this test has no case for: each needs a row and a case."""
    have = {c.label.split("(")[0].split(" ")[0] for c in opt_cases + sched_cases}
    out = []
    for mod, base in ((O, O.Optimizer), (L, None)):
        for n in dir(mod):
            k = getattr(mod, n)
            if not isinstance(k, type) or n.startswith("_") or n in ("Optimizer", "LRScheduler"):
                continue
            is_sched = mod is L and (hasattr(k, "step") and hasattr(k, "state_dict") and
                                     k.__module__.endswith("lr_scheduler") and
                                     (issubclass(k, getattr(L, "LRScheduler", L._LRScheduler)) or
                                      n == "ReduceLROnPlateau"))
            if ((base is not None and issubclass(k, base)) or is_sched) and n not in have:
                out.append(f"{mod.__name__}.{n}")
    return out


def run_zero(p, lr):
    import torch.distributed as dist
    from torch.distributed.optim import ZeroRedundancyOptimizer
    if not dist.is_initialized():
        dist.init_process_group("gloo", init_method="file://" + os.path.join(TMP, "pg"), rank=0,
                                world_size=1)
    return ZeroRedundancyOptimizer(p, optimizer_class=O.AdamW, lr=lr)


def checkpoint(case, sched):
    torch.manual_seed(0)
    np.random.seed(0)
    random.seed(0)
    m = case.model()
    opt = run_zero(m.parameters(), 1e-2) if case.zero else case.make(m.parameters())
    sch = sched.make(opt) if sched else None
    sparse = isinstance(m[0], nn.Embedding)
    g = torch.Generator().manual_seed(1)
    x = torch.randint(0, 16, (32, 3), generator=g) if sparse else torch.randn(32, 4, generator=g)
    y = torch.randn(32, 2, generator=g)
    for k in range(N):
        i = (k % 4) * 8

        def closure():
            opt.zero_grad()
            out = m(x[i:i + 8]).mean(1) if sparse else m(x[i:i + 8])
            loss = nn.functional.mse_loss(out, y[i:i + 8])
            loss.backward()
            return loss

        # LBFGS re-evaluates through the closure; the others are stepped as loops usually do
        # (transformers' Adafactor calls a closure under no_grad).
        if isinstance(opt, O.LBFGS):
            loss = float(opt.step(closure).detach())
        else:
            loss = closure().item()
            opt.step()
        if sch is not None and (sched.per == "step" or (k + 1) % 4 == 0):
            sched.step(sch, k, loss)
    if case.zero:
        opt.consolidate_state_dict(to=0)
    d = {"model": m.state_dict(), "optimizer": opt.state_dict(),
         "rng": {"cpu": torch.get_rng_state(), "numpy": np.random.get_state(),
                 "python": random.getstate()},
         "loader": {"epoch": N // 4, "batch_idx": N % 4, "samples_seen": N * 8},
         "global_step": N, "epoch": N // 4}
    if sch is not None:
        d["scheduler"] = sch.state_dict()
    return d


def audit(path):
    r = subprocess.run([A["ckpt"], "audit", "--json", path], capture_output=True, text=True)
    try:
        return r.returncode, json.loads(r.stdout)["components"]
    except ValueError:
        return r.returncode, {"optimizer": {"status": "?", "evidence": r.stderr.strip()},
                              "scheduler": {"status": "?", "evidence": ""}}


def identified(comp, name, row):
    """Did the audit identify the component as `row` (alone, or among the candidates when the
    shape cannot tell them apart)? Its evidence reads "c.pt: optimizer: <label> state for ...",
    "c.pt: scheduler: <kind> ..."."""
    e = comp.get("evidence", "")
    if name == "optimizer":
        m = re.search(r"optimizer: (.*?) state for", e)
        return m is not None and row in m.group(1)
    return re.search(r"scheduler: " + re.escape(row) + r"( |$)", e) is not None


def run_case(case, sched, path, failures, exercised, drop_others=False):
    what = f"{case.label} + {sched.label if sched else 'no scheduler'}"
    try:
        d = checkpoint(case, sched)
    except Exception as e:  # noqa: BLE001 - the library refuses this case here
        why = f"{what}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}"
        if case.lib == "torch" and (sched is None or sched.lib == "torch"):
            failures.append(why)  # torch's own classes must always run
            return None
        return why
    try:
        torch.save(d, path)
    except Exception as e:  # noqa: BLE001 - torch 1.13's CyclicLR state holds a WeakMethod
        return f"{what}: torch.save: {type(e).__name__}: {str(e)[:120]}"
    rc, comps = audit(path)
    o, s = comps["optimizer"], comps.get("scheduler", {})
    ok = rc == 0 and o["status"] == "present" and identified(o, "optimizer", case.row)
    if sched is not None:
        ok = ok and s["status"] == "present" and identified(s, "scheduler", sched.row)
    if not ok:
        failures.append(f"{what}: exit {rc}, optimizer {o['status']} ({o['evidence'][:300]}), "
                        f"scheduler {s.get('status')} ({s.get('evidence', '')[:300]})")
        return None
    exercised.setdefault(case.row, []).append(case.label)
    if sched is not None:
        exercised.setdefault(sched.row, []).append(sched.label)
    drops = ["optimizer"] + (["scheduler"] if sched is not None else [])
    if drop_others:
        drops += ["model", "rng", "loader"]
    # A scheduler leaves its mark in the optimizer: param_groups[i]["initial_lr"]. One that
    # writes none (ReduceLROnPlateau, and what is built like it) leaves no trace once removed:
    # the audit then says no scheduler was ever attached, and can say nothing else.
    marked = all("initial_lr" in g for g in d["optimizer"]["param_groups"])
    if sched is not None and not marked:
        NO_TRACE.add(sched.label)
    for drop in drops:
        e = dict(d)
        del e[drop]
        torch.save(e, path)
        rc, comps = audit(path)
        comp = {"rng": "rng_cpu"}.get(drop, drop)
        if drop == "scheduler" and not marked:
            if rc != 0 or comps[comp]["status"] != "not_applicable":
                failures.append(f"{what} without its scheduler (no initial_lr): exit {rc}, "
                                f"{comps[comp]['status']} ({comps[comp]['evidence'][:200]})")
        elif rc != 2 or comps[comp]["status"] != "missing":
            failures.append(f"{what} without {drop}: exit {rc}, {comp} {comps[comp]['status']} "
                            f"({comps[comp]['evidence'][:300]})")
    return None


NO_TRACE = set()  # schedulers whose removal leaves no trace in the optimizer


def wanted(lib):
    return ONLY is None or lib in ONLY


def main():
    global TMP
    opt_cases = torch_optimizers() + library_optimizers()
    sched_cases = torch_schedulers() + library_schedulers()
    failures, exercised, refused = [], {}, []
    unlisted = unlisted_torch_classes(opt_cases, sched_cases)
    for u in unlisted:
        failures.append(f"{u}: no case here (and perhaps no knowledge-table row): add both")
    default = Sched("CosineAnnealingLR", "CosineAnnealingLR", lambda o: L.CosineAnnealingLR(o, 10))
    adafactor_sched = Sched("AdafactorSchedule", "LambdaLR",
                            lambda o: tf_opt.AdafactorSchedule(o), "transformers")
    cases = 0
    with tempfile.TemporaryDirectory() as TMP:
        path = os.path.join(TMP, "c.pt")
        combos = [(c, {"cos": default, "adafactor": adafactor_sched}.get(c.sched))
                  for c in opt_cases if wanted(c.lib)]
        adamw = Case("AdamW", "Adam/AdamW", lambda p: O.AdamW(p, lr=1e-2))
        combos += [(adamw, s) for s in sched_cases if wanted(s.lib)]
        for i, (c, s) in enumerate(combos):
            cases += 1
            why = run_case(c, s, path, failures, exercised, drop_others=i == 0)
            if why:
                refused.append(why)
    print(f"knowledge property: {cases} optimizer/scheduler checkpoints (torch {torch.__version__}, "
          f"{sys.executable}), each also without its optimizer and without its scheduler: "
          f"{len(failures)} failure(s)")
    for f in failures:
        print("  FAIL", f)
    print_coverage(exercised, refused)
    return 1 if failures else 0


def reason_for(name, lib):
    if name in NO_CPU:
        return NO_CPU[name]
    if ONLY is not None and lib.lower() not in {x.lower() for x in ONLY}:
        return f"not run here (--only {','.join(sorted(ONLY))})"
    why = {"timm": timm_why, "transformers": tf_why, "bitsandbytes": bnb_why,
           "DeepSpeed": ds_why, "mmengine": mm_why}.get(lib)
    if why:
        return why
    if name == "Adafactor":
        return f"torch {torch.__version__} has no torch.optim.Adafactor (2.5+)"
    if name == "Muon":
        return f"torch {torch.__version__} has no torch.optim.Muon (2.9+)"
    return "no case produced it here (see the refusals above)"


def print_coverage(exercised, refused):
    opt_rows, sched_rows = table_rows()
    for r in refused:
        print("  refused by its library here:", r)
    zero = exercised.get("Adam/AdamW", [])
    for title, rows in (("optimizer rows (knowledge.cc optimizer_classes())", opt_rows),
                        ("scheduler rows (knowledge.cc scheduler_classes())", sched_rows)):
        done = sum(1 for n, _ in rows if n in exercised)
        print(f"{title}: {done} of {len(rows)} exercised")
        for name, lib in rows:
            if name in exercised:
                labels = sorted(set(exercised[name]))
                print(f"  exercised  {name:44} {', '.join(labels)}")
            else:
                print(f"  NOT        {name:44} {reason_for(name, lib)}")
    if NO_TRACE:
        print("  without their state, these leave no trace (no initial_lr in param_groups), so "
              "the audit reads the checkpoint as never scheduled: " + ", ".join(sorted(NO_TRACE)))
    z = [x for x in zero if x.startswith("ZeroRedundancyOptimizer")]
    print(f"  {'exercised' if z else 'NOT      '}  {'ZeroRedundancyOptimizer (no row of its own)':44} "
          f"{z[0] + ': its consolidated state is the Adam/AdamW row' if z else ''}")


if __name__ == "__main__":
    sys.exit(main())
