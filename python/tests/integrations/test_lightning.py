"""ckpt.integrations.lightning.CkptIO with a real Lightning Trainer (an MLP with dropout and
augmentation noise drawn in the workers, CPU, accumulate_grad_batches=2, 2 DataLoader workers,
ModelCheckpoint every 3 steps with save_last): a run SIGKILLed mid-epoch and resumed with
fit(ckpt_path="last") in a fresh process ends bit-identical to one that never stopped, with the
same per-step losses; Lightning's own .ckpt resume runs beside it and is recorded."""
import json

from conftest import audit_is_complete, compare, run_script

SCRIPT = "lightning_train.py"


def test_lightning_ckptio_resume_is_bit_exact_and_own_resume_is_recorded(fw_python, tmp_path,
                                                                        record_property):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", straight)
    # killed when step 13 has ended (epoch 1, 5 steps in); last.ckpt holds step 12 or, when
    # the background commit of 12 had not finished, 9: mid-epoch either way
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed, "--kill-at", 13,
               expect=-9)
    last = resumed / "checkpoints" / "last.ckpt"
    assert (last / "LATEST").read_text().strip() in ("step-000000000009", "step-000000000012")
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed, "--resume")
    assert json.loads((resumed / "result.json").read_text())["global_step"] == 14
    ours = compare(straight, resumed)
    assert ours["params_bit_exact"], ours
    assert ours["losses_equal"] and ours["steps_compared"] == 14, ours

    own_straight, own_resumed = tmp_path / "own_straight", tmp_path / "own_resumed"
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_straight)
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_resumed, "--kill-at", 13,
               expect=-9)
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_resumed, "--resume")
    theirs = compare(own_straight, own_resumed)
    record_property("ckpt_resume", json.dumps(ours))
    record_property("lightning_own_resume", json.dumps(theirs))
    print("ckpt resume:", ours)
    print("Lightning's own resume:", theirs)
    audit_is_complete(last)
