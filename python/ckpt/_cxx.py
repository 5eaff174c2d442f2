"""Components written by the C++ Checkpointer (ckpt/torch's layouts, docs/format.md), as the
state_dicts the live Python objects load. A C++-written component is a group without the
``ckpt.kind`` attribute python/ckpt/_tree.py puts on every group it writes.
- model: the tensors by dotted name, as torch's state_dict; param_names / buffer_names dropped.
- optimizer: state/<param name> and groups/<g> (names from the module) become torch's
  state/<index> and param_groups/<g>, numbered in param-group order as torch numbers them; the
  live optimizer's own group keys (foreach, maximize, ...) fill what C++ does not record.
- rng and loader: the same layout on both sides."""
import torch


def is_cxx(meta):
    return "ckpt.kind" not in meta["attrs"]


def convert(state, obj):
    if isinstance(obj, torch.nn.Module):
        return {k: v for k, v in state.items() if k not in ("param_names", "buffer_names")}
    if isinstance(obj, torch.optim.Optimizer) and "groups" in state and "param_names" in state:
        return _optimizer(state, obj)
    return state


def _optimizer(state, opt):
    names = list(state["param_names"])
    index = {n: i for i, n in enumerate(names)}
    live = opt.state_dict()["param_groups"]
    saved = state["groups"]
    if len(saved) != len(live):
        from .errors import MismatchError
        raise MismatchError(f"optimizer: the checkpoint has {len(saved)} param groups, the live "
                            f"optimizer {len(live)}")
    groups = []
    for g, here in enumerate(live):
        group = dict(here)
        for k, v in saved[str(g)].items():
            if k != "params":
                group[k] = tuple(v) if isinstance(v, list) else v
        group["params"] = [index[n] for n in saved[str(g)]["params"]]
        groups.append(group)
    per_param = {}
    for name, st in state.get("state", {}).items():
        entry = {k: v for k, v in st.items() if isinstance(v, torch.Tensor)}
        if "step" in st:
            entry["step"] = torch.tensor(float(st["step"]))
        per_param[index[name]] = entry
    return {"state": per_param, "param_groups": groups}
