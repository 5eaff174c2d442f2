"""Lightning's CkptIO and Accelerate's save_state/load_state with an s3:// run directory, one
process per call (test_s3_integrations.py): a small MLP trained for 4 steps, saved to the store,
then restored in a fresh process.

  s3_train.py lightning|accelerate save|load|remove URL

Prints one line "RESULT {JSON}": {"step": …, "params": hex XXH3 of every parameter's bytes,
"lr": …} ({"exists": …} for remove)."""
import json
import sys

import torch

import ckpt
from ckpt import _core


def digest(model):
    raw = b"".join(p.detach().contiguous().numpy().tobytes() for p in model.parameters())
    return _core.xxh3_hex(raw)


def data():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(64, 4, generator=g), torch.randn(64, 1, generator=g)
    return torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=16)


def lightning(action, url):
    import lightning as L
    from ckpt.integrations.lightning import CkptIO

    if torch.__version__.startswith("1.13") and sys.version_info >= (3, 11):
        # as lightning_train.py: torch 1.13's torch.distributed._shard fails to import on
        # Python 3.11, and Lightning's ShardedTensor hooks are of no use here
        L.LightningModule._register_sharded_tensor_state_dict_hooks_if_available = (
            lambda self: None)

    class Mlp(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(),
                                           torch.nn.Linear(8, 1))

        def training_step(self, batch, _):
            x, y = batch
            return torch.nn.functional.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-2)

    if action == "remove":
        CkptIO().remove_checkpoint(url)
        return {"exists": _core.is_dir(url)}
    torch.manual_seed(0)
    model = Mlp()
    trainer = L.Trainer(max_steps=4, accelerator="cpu", logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False,
                        plugins=[CkptIO(blocking=True)])
    if action == "save":
        trainer.fit(model, data())
        trainer.save_checkpoint(url)
    else:  # resumes at step 4 of 4: nothing left to train, the parameters are the saved ones
        trainer.fit(model, data(), ckpt_path=url)
    return {"step": trainer.global_step, "params": digest(model),
            "lr": trainer.optimizers[0].param_groups[0]["lr"]}


def accelerate(action, url):
    from accelerate import Accelerator
    from ckpt.integrations.accelerate import close, load_state, save_state

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    acc = Accelerator(cpu=True)
    model, opt, loader = acc.prepare(model, opt, data())
    step = 0
    if action == "save":
        for x, y in loader:
            opt.zero_grad()
            acc.backward(torch.nn.functional.mse_loss(model(x), y))
            opt.step()
            step += 1
        save_state(acc, url, step=step)
    else:
        step = load_state(acc, url).step
    close(acc)
    return {"step": step, "params": digest(model), "lr": opt.param_groups[0]["lr"]}


if __name__ == "__main__":
    framework, action, url = sys.argv[1:4]
    assert ckpt.__name__ == "ckpt"
    run = {"lightning": lightning, "accelerate": accelerate}[framework]
    print("RESULT", json.dumps(run(action, url)))
