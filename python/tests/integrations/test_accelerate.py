"""ckpt.integrations.accelerate.save_state/load_state with a real Accelerate loop (an MLP with
dropout and augmentation noise drawn in the workers, CPU, gradient_accumulation_steps=2, 2
DataLoader workers): a run SIGKILLed mid-epoch and resumed in a fresh process ends
bit-identical to one that never stopped, with the same per-step losses; Accelerate's own
save_state/load_state resume (with skip_first_batches) runs beside it and is recorded."""
import json

from conftest import audit_is_complete, compare, run_script

SCRIPT = "accelerate_train.py"


def test_accelerate_save_load_state_resume_is_bit_exact_and_own_is_recorded(fw_python, tmp_path,
                                                                           record_property):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", straight)
    # killed after step 11 (epoch 1, 3 steps in); the newest save is step 9, mid-epoch
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed, "--kill-at", 11,
               expect=-9)
    assert (resumed / "run" / "LATEST").read_text().strip() == "step-000000000009"
    run_script(fw_python, SCRIPT, "--mode", "ckpt", "--out", resumed)
    assert json.loads((resumed / "result.json").read_text())["step"] == 14
    ours = compare(straight, resumed)
    assert ours["params_bit_exact"], ours
    assert ours["losses_equal"] and ours["steps_compared"] == 14, ours

    own_straight, own_resumed = tmp_path / "own_straight", tmp_path / "own_resumed"
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_straight)
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_resumed, "--kill-at", 11,
               expect=-9)
    run_script(fw_python, SCRIPT, "--mode", "own", "--out", own_resumed)
    theirs = compare(own_straight, own_resumed)
    record_property("ckpt_resume", json.dumps(ours))
    record_property("accelerate_own_resume", json.dumps(theirs))
    print("ckpt resume:", ours)
    print("Accelerate's own resume:", theirs)
    audit_is_complete(resumed / "run")
