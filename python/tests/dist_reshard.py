"""One rank of a small DDP run (gloo on 127.0.0.1) that records the sample ids of every batch,
for test_reshard.py: a run started at one world size and resumed at another.
Usage: dist_reshard.py RUN_DIR STEPS STOP_AFTER IDS_OUT [N] (env: RANK, WORLD_SIZE, MASTER_*).
N: the dataset's size (default 100). Saves every 5 steps and at STEPS; stops right after step
STOP_AFTER (0: never). Each batch's record has its ids and "pad", how many of the last ones are
the loader's epoch-tail padding."""
import json
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import ckpt


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(3)
        self.n = n
        self.x, self.y = torch.randn(n, 8, generator=g), torch.randn(n, 1, generator=g)

    def __len__(self):
        return self.n

    def __getitem__(self, i):
        return self.x[i], self.y[i], i


def main(run_dir, steps, stop_after, ids_out, n=100):
    dist.init_process_group("gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 1)))
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    loader = ckpt.ResumableLoader(Data(n), batch_size=8, seed=1)  # rank, world from dist
    log = open(f"{ids_out}-rank{rank}.jsonl", "a")
    with ckpt.Checkpointer(run_dir) as ck:
        ck.track(model=model.module, optimizer=opt, loader=loader)
        rep = ck.restore_latest()
        step = rep.step
        log.write(json.dumps({"restored": rep.restored, "step": step, "world": world}) + "\n")
        while step < steps and step != stop_after:
            for x, y, ids in loader:
                step += 1
                epoch = loader.last_batch()[0]
                log.write(json.dumps({"step": step, "epoch": epoch, "ids": ids.tolist(),
                                     "pad": loader.padding()}) + "\n")
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                ck.log_progress(step, loss=loss.item())
                if step % 5 == 0 or step == steps:
                    ck.save(step)
                if step in (stop_after, steps):
                    break
    log.close()
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], *map(int, sys.argv[5:]))
    sys.stdout.flush()
    os._exit(0)  # a gloo thread freeing tensors during finalization aborts
