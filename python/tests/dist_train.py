"""One rank of a small DistributedDataParallel run (gloo on 127.0.0.1), for test_distributed.py.
Usage: dist_train.py RUN_DIR STEPS STOP_AFTER PARAMS_OUT [async] [ddp|per-rank] (env: RANK,
WORLD_SIZE, MASTER_*). "async": non-blocking saves (the barrier and commit run at the next save /
close). The model is tracked as `ddp.module` with Checkpointer(replicated=("model",)): one rank
writes each of its tensors and of the optimizer's; "ddp": the DDP module itself is tracked (found
replicated); "per-rank": `ddp.module`, not declared (every rank writes its own copy);
"diverge": rank 1 changes a weight after DDP broadcast it, so the ranks no longer agree."""
import os
import sys

import torch
import torch.distributed as dist
from torch import nn

import ckpt


class Data(torch.utils.data.Dataset):
    def __init__(self):
        g = torch.Generator().manual_seed(3)
        self.x, self.y = torch.randn(100, 8, generator=g), torch.randn(100, 1, generator=g)

    def __len__(self):
        return 100

    def __getitem__(self, i):
        return self.x[i] + 0.05 * torch.randn(8), self.y[i]


def main(run_dir, steps, stop_after, params_out, flags):
    dist.init_process_group("gloo")
    torch.manual_seed(0)
    # the 512 x 512 weight and its moments (1 MiB each) are spread over the ranks' files; the
    # smaller tensors all go to rank 0 (docs/format.md §8, the owner rule)
    model = nn.parallel.DistributedDataParallel(
        nn.Sequential(nn.Linear(8, 512), nn.ReLU(), nn.Dropout(0.1), nn.Linear(512, 512),
                      nn.ReLU(), nn.Linear(512, 1)))
    if "diverge" in flags and dist.get_rank() == 1:
        with torch.no_grad():
            model.module[3].weight[7, 9] += 1.0
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    loader = ckpt.ResumableLoader(Data(), batch_size=8, seed=1)  # rank, world from dist
    declared = () if {"ddp", "per-rank"} & set(flags) else ("model",)
    blocking = "async" not in flags
    with ckpt.Checkpointer(run_dir, replicated=declared) as ck:
        ck.track(model=model if "ddp" in flags else model.module, optimizer=opt, loader=loader)
        step = ck.restore_latest().step
        while step < steps:
            for x, y in loader:
                step += 1
                loss = nn.functional.mse_loss(model(x), y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                ck.log_progress(step, loss=loss.item())
                if step % 5 == 0:
                    ck.save(step, blocking=blocking)
                if step in (stop_after, steps):
                    break
            if step == stop_after:
                break
    if step == steps and dist.get_rank() == 0:
        flat = torch.cat([t.flatten() for t in model.module.state_dict().values()])
        open(params_out, "wb").write(flat.detach().numpy().tobytes())
    dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5:])
    sys.stdout.flush()
    os._exit(0)  # a gloo thread freeing tensors during finalization aborts
