"""ckpt.integrations.hf.CkptCallback with a real transformers.Trainer (tiny GPT-2 from a
config, CPU, gradient accumulation 2, 2 DataLoader workers, dropout): a run SIGKILLed mid-epoch
and resumed in a fresh process ends bit-identical to one that never stopped, with the same
per-step losses; the Trainer's own checkpoint-N resume runs beside it and is recorded."""
import json
from conftest import audit_is_complete, compare, run_script

SCRIPT = "hf_train.py"


def test_hf_callback_resume_is_bit_exact_and_hf_own_resume_is_recorded(fw_python, tmp_path,
                                                                      record_property):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", straight)
    # killed at the end of step 11 (epoch 1, 3 steps in): the newest save is step 9 (or 6 if
    # the background commit of 9 had not finished), both mid-epoch
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed, "--kill-at", 11,
               expect=-9)
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed)
    res = json.loads((resumed / "result.json").read_text())
    assert res["restored_step"] in (6, 9), res
    assert res["global_step"] == 14
    ours = compare(straight, resumed)
    assert ours["params_bit_exact"], ours
    assert ours["losses_equal"] and ours["steps_compared"] == 14, ours
    # the Trainer's loss total (its train_loss metric) is part of the checkpoint too
    assert res["train_loss"] == json.loads((straight / "result.json").read_text())["train_loss"]

    # The Trainer's own checkpoints (checkpoint-N), killed at the same step, resumed with
    # resume_from_checkpoint=True: recorded, not asserted.
    hf_straight, hf_resumed = tmp_path / "hf_straight", tmp_path / "hf_resumed"
    run_script(fw_python, SCRIPT, "--mode", "hf", "--out", hf_straight)
    run_script(fw_python, SCRIPT, "--mode", "hf", "--out", hf_resumed, "--kill-at", 11,
               expect=-9)
    run_script(fw_python, SCRIPT, "--mode", "hf", "--out", hf_resumed, "--resume")
    theirs = compare(hf_straight, hf_resumed)
    theirs["train_loss"] = [json.loads((d / "result.json").read_text())["train_loss"]
                            for d in (hf_straight, hf_resumed)]
    record_property("ckpt_resume", json.dumps(ours))
    record_property("hf_own_resume", json.dumps(theirs))
    print("ckpt resume:", ours)
    print("HF's own resume:", theirs)

    audit_is_complete(resumed / "run")
