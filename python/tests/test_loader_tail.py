"""An epoch's tail under several ranks (issue 29, item 1): with N mod (batch x world) between 1 and
world - 1 the last step used to give some ranks an empty batch, and default_collate raised
IndexError. Now, as with DistributedSampler, every rank takes the same number of steps, never an
empty batch: without drop_last the last step is padded with samples from the head of the epoch
(not counted as consumed), with drop_last the global tail is left out. Ranks are simulated in one
process (loaders built with rank= and world_size=), then checked once for real: 2 gloo processes,
resumed before the tail, and `ckpt coverage` of the run."""
import json
import math
import subprocess

import pytest
import torch

import ckpt
from conftest import BUILD
from test_reshard import launch as launch_reshard
from test_reshard import records


class Ids(torch.utils.data.Dataset):
    def __init__(self, n):
        self.n = n

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return i


def loaders(n, batch, world, drop_last=False, workers=0, state=None):
    out = [ckpt.ResumableLoader(Ids(n), batch_size=batch, seed=11, world_size=world, rank=r,
                                drop_last=drop_last, num_workers=workers) for r in range(world)]
    if state is not None:
        for ld in out:
            ld.load_state_dict(state)
    return out


def lockstep(lds, steps=None):
    """One `for` loop of every rank, step by step: [step][rank] = (ids, padding)."""
    its = [iter(ld) for ld in lds]
    out = []
    while steps is None or len(out) < steps:
        row = []
        for it, ld in zip(its, lds):
            b = next(it, None)
            row.append(None if b is None else (b.tolist(), ld.padding()))
        if all(b is None for b in row):
            break
        assert None not in row, f"ranks ended after different numbers of steps: {row}"
        out.append(row)
    return out


def order_from(steps, n, world, batch):
    """The epoch's order as the documented rule deals it: position g goes to rank g mod W; step s
    holds positions [s G, s G + G) (G = batch x world), each rank's in increasing order."""
    g = batch * world
    order = [None] * n
    for s, row in enumerate(steps):
        for r, (ids, pad) in enumerate(row):
            real = ids[:len(ids) - pad]
            pos = [p for p in range(s * g, min(n, s * g + g)) if p % world == r]
            assert len(pos) == len(real)
            for p, i in zip(pos, real):
                order[p] = i
    return order


CASES = [(w, b, n) for w in (2, 3, 4) for b in (1, 3) for n in range(1, 3 * b * w + 1)]


@pytest.mark.parametrize("world,batch,n", CASES)
def test_every_remainder_pads_the_last_step_and_covers_the_epoch_once(world, batch, n):
    lds = loaders(n, batch, world)
    steps = lockstep(lds)
    g = batch * world
    assert len(steps) == math.ceil(n / g) == len(lds[0])
    order = order_from(steps, n, world, batch)
    assert sorted(order) == list(range(n))  # every sample once, across ranks and steps
    for s, row in enumerate(steps):
        left = n - s * g
        want = batch if left >= g else math.ceil(left / world)
        assert [len(ids) for ids, _ in row] == [want] * world  # never empty, all the same size
        for r, (ids, pad) in enumerate(row):
            if left >= g:
                assert pad == 0
                continue
            # the padding: virtual positions N, N+1, ... of rank r, i.e. the head of the epoch
            virtual = [p for p in range(n, s * g + want * world) if p % world == r]
            assert pad == len(virtual)
            assert ids[want - pad:] == [order[p % n] for p in virtual]
    assert sum(pad for _, pad in steps[-1]) == math.ceil((n - (len(steps) - 1) * g) / world) * \
        world - (n - (len(steps) - 1) * g)
    for ld in lds:  # the cursor and samples_seen count real positions only
        assert ld.samples_seen() == n and ld.cursor() == (1, 0)
        assert ld.last_batch()[2] == n - (len(steps) - 1) * g


@pytest.mark.parametrize("world,batch,n", [c for c in CASES if c[2] >= c[0] * c[1]])
def test_drop_last_leaves_out_the_global_tail_and_never_pads(world, batch, n):
    lds = loaders(n, batch, world, drop_last=True)
    steps = lockstep(lds)
    g = batch * world
    assert len(steps) == n // g == len(lds[0])
    seen = [i for row in steps for ids, pad in row for i in ids]
    assert len(seen) == len(set(seen)) == n // g * g
    assert all(len(ids) == batch and pad == 0 for row in steps for ids, pad in row)


@pytest.mark.parametrize("world,rem", [(w, r) for w in (2, 3, 4) for r in range(1, 2 * w)])
def test_resume_before_the_tail_gives_the_same_padded_step_and_next_epoch(world, rem):
    batch = 2
    g = batch * world
    n = 3 * g + rem
    ref_lds = loaders(n, batch, world)
    ref = lockstep(ref_lds)
    ref_next = lockstep(ref_lds)  # each loader's second loop: epoch 1
    first = loaders(n, batch, world)
    assert lockstep(first, steps=len(ref) - 1) == ref[:-1]
    state = first[0].state_dict()
    assert (state["epoch"], state["position"]) == (0, (len(ref) - 1) * g)
    again = loaders(n, batch, world, state=state)
    assert lockstep(again) == ref[-1:]
    assert lockstep(again) == ref_next
    # and the tail resharded to every other world size: the rest of the epoch once, no empty batch
    rest = [i for ids, pad in ref[-1] for i in ids[:len(ids) - pad]]
    for other in (2, 3, 4):
        tail = lockstep(loaders(n, batch, other, state=state))
        got = [i for row in tail for ids, pad in row for i in ids[:len(ids) - pad]]
        assert sorted(got) == sorted(rest)
        assert all(ids for row in tail for ids, _ in row)


def test_padding_with_workers_is_the_same_as_in_process():
    n, batch, world = 97, 8, 2  # the case: the last step holds one position
    want = lockstep(loaders(n, batch, world))
    got = lockstep(loaders(n, batch, world, workers=2))
    assert got == want
    assert [len(ids) for ids, _ in want[-1]] == [1, 1] and [p for _, p in want[-1]] == [0, 1]


def test_two_gloo_ranks_pad_the_tail_and_coverage_counts_it_once(tmp_path):
    # 97 samples, batch 8, 2 ranks: step 7 holds position 96 only, so rank 1 gets one padded
    # sample (position 97 -> 0, the epoch's first). Stop after step 5 (a checkpoint), resume.
    run = tmp_path / "run"
    launch_reshard(run, 8, 5, tmp_path / "a", world=2, n=97)
    launch_reshard(run, 8, 0, tmp_path / "b", world=2, n=97)
    a, b = records(tmp_path / "a", 2), records(tmp_path / "b", 2)
    assert [rec[0]["step"] for rec in b] == [5, 5]
    tail = [rec[2] for rec in b]  # step 7
    assert [e["step"] for e in tail] == [7, 7] and [len(e["ids"]) for e in tail] == [1, 1]
    assert [e["pad"] for e in tail] == [0, 1]
    first = a[0][1]["ids"][0]  # position 0 of epoch 0: rank 0's first sample
    assert tail[1]["ids"] == [first]
    real = [i for rec in a + b for e in rec[1:] if e["epoch"] == 0
            for i in e["ids"][:len(e["ids"]) - e["pad"]]]
    assert sorted(real) == list(range(97))
    cov = subprocess.run([str(BUILD / "cli" / "ckpt"), "coverage", str(run), "--json"],
                         capture_output=True, text=True)
    assert cov.returncode == 0, cov.stdout + cov.stderr
    e0 = json.loads(cov.stdout)["epochs"][0]
    assert (e0["epoch"], e0["unique"], e0["visits"], e0["repeats"]) == (0, 97, 97, 0), e0
