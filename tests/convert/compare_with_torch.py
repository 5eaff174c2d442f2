#!/usr/bin/python3
"""Reads a converted checkpoint with h5py and the source with torch.load (Debian's python3-torch
and python3-h5py), and checks that every model and optimizer-state tensor and every scheduler
field came through unchanged. Only for our own fixtures (torch.load runs their pickles).

usage: compare_with_torch.py SOURCE.pt RANK_FILE.h5   (prints "ok N" or exits 1 naming the key)
"""
import sys

import h5py
import numpy
import torch


def same(name, t, ds):
    if t.dtype == torch.bfloat16:  # numpy has no bfloat16: the raw 16-bit patterns, from the file
        want = t.contiguous().view(torch.int16).numpy()
        with open(ds.file.filename, "rb") as raw:
            raw.seek(ds.id.get_offset())
            got = numpy.frombuffer(raw.read(want.nbytes), dtype=numpy.int16).reshape(want.shape)
    else:
        want = t.contiguous().numpy()
        got = ds[()]
    if want.shape != numpy.shape(got) or want.tobytes() != numpy.asarray(got).tobytes():
        sys.exit(f"{name}: torch {t.dtype} {list(t.shape)} differs from {ds.name} "
                 f"{ds.dtype} {numpy.shape(got)}")


def main():
    src = torch.load(sys.argv[1], map_location="cpu")
    f = h5py.File(sys.argv[2], "r")
    n = 0
    for k, t in src["model"].items():
        same(f"model.{k}", t, f["model"][k])
        n += 1
    for pid, st in src["optimizer"]["state"].items():
        for k, t in st.items():
            same(f"optimizer.state.{pid}.{k}", t, f["optimizer"]["state"][str(pid)][k])
            n += 1
    for i, g in enumerate(src["optimizer"]["param_groups"]):
        h = f["optimizer"]["param_groups"][str(i)]
        if list(h.attrs["params"]) != g["params"] or h.attrs["lr"] != g["lr"]:
            sys.exit(f"optimizer.param_groups[{i}]: params/lr differ")
        n += 1
    for k, v in src["scheduler"].items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            if f["scheduler"].attrs[k] != v:
                sys.exit(f"scheduler.{k}: {v} vs {f['scheduler'].attrs[k]}")
            n += 1
    same("rng", src["rng"], f["rng"]["cpu"]["state"])
    if f["train"].attrs["global_step"] != src["global_step"]:
        sys.exit("global_step differs")
    print("ok", n + 2)


if __name__ == "__main__":
    main()
