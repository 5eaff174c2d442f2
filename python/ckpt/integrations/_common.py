"""What the integrations share: a Checkpointer that records the gradient-accumulation length
the framework trains with (the train component's grad_accum_steps and the journal's start event
grad_accum, docs/format.md), since a framework's step is an optimizer step of that many
batches."""
from typing import Any, Dict, List, Tuple

from ..checkpointer import Checkpointer


class AccumCheckpointer(Checkpointer):
    """ckpt.Checkpointer, with grad_accum_steps batches per step recorded (saves happen on
    optimizer steps only, so grad_accum_pos stays 0), and, where the framework steps the
    scheduler more than once per optimizer step (Accelerate: once per process), that count as
    the train component's scheduler_steps_per_step (what `ckpt audit` compares last_epoch
    with)."""

    grad_accum_steps = 1
    scheduler_steps_per_step = 1

    def _capture(self, step: int, keep: List[Any],
                 skipped: List[str]) -> Tuple[Dict[str, Any], List[str]]:
        root, names = super()._capture(step, keep, skipped)
        attrs = root["children"]["train"]["attrs"]
        attrs["grad_accum_steps"] = int(self.grad_accum_steps)
        if self.scheduler_steps_per_step > 1:
            attrs["scheduler_steps_per_step"] = int(self.scheduler_steps_per_step)
        return root, names

    def _event(self, kind: str, durable: bool, **fields: Any) -> None:
        if kind == "start":
            fields["grad_accum"] = int(self.grad_accum_steps)
        super()._event(kind, durable, **fields)


def single_process(ck: Checkpointer) -> Checkpointer:
    """`ck` writing a one-rank checkpoint from this process alone, also under torch.distributed:
    for frameworks that save from global rank 0 only (Lightning's CheckpointIO), where the other
    ranks never reach the commit's barriers."""
    ck.rank, ck.world_size, ck._barrier = 0, 1, None
    return ck
