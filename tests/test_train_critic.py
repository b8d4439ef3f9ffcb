"""Med-CoDE critic fine-tuning (§4.1): LoRA on a tiny random causal LM, loss on the critique tokens only."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.errors import UserError
from pipeline.train.critic import (
    PAPER,
    PLAIN_TEMPLATE,
    CriticSettings,
    critic_messages,
    encode_example,
    tiny_tokenizer,
    train_critic_command,
)
from pipeline.train.data import sha256_file
from tests.test_train_classifier import write_csv

REPO = Path(__file__).resolve().parent.parent


def test_defaults_are_the_papers():
    s = CriticSettings()
    assert (s.lora_r, s.epochs, s.batch_size, s.learning_rate) == \
        (PAPER["lora_r"], PAPER["epochs"], PAPER["batch_size"], PAPER["learning_rate"]) == (16, 5, 128, 1.41e-5)
    assert s.accumulation == 32 and s.lora_alpha == 32
    with pytest.raises(UserError, match="multiple"):
        CriticSettings(batch_size=10, micro_batch_size=4).check()


def test_prompt_tokens_carry_no_loss():
    messages = critic_messages("Can I read?", "Yes, from day one.", "No, wait a month.")
    assert "Can I read?" in messages[1]["content"] and "Yes, from day one." in messages[1]["content"]
    critique = "Contradicts the ground truth entirely."
    tokenizer = tiny_tokenizer([m["content"] for m in messages] + [PLAIN_TEMPLATE, critique])
    ids, labels = encode_example(tokenizer, messages, critique)
    target = tokenizer(critique, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    n_prompt = len(ids) - len(target)
    assert len(ids) == len(labels) and n_prompt > 20
    assert labels[:n_prompt] == [-100] * n_prompt and labels[n_prompt:] == ids[n_prompt:] == target

    # with a chat template the target is the assistant turn the template writes (critique + end-of-turn)
    tokenizer.chat_template = ("{% for m in messages %}<{{ m['role'] }}> {{ m['content'] }} [EOS] {% endfor %}"
                               "{% if add_generation_prompt %}<assistant> {% endif %}")
    ids, labels = encode_example(tokenizer, messages, critique)
    target = [i for i in labels if i != -100]
    assert tokenizer.decode(target) == "contradicts the ground truth entirely . [EOS]"
    assert labels[:len(ids) - len(target)] == [-100] * (len(ids) - len(target))


def test_tiny_lora_run_writes_an_adapter_and_the_loss_falls(tmp_path):
    from safetensors.torch import load_file

    path = write_csv(tmp_path / "critiques.csv", per_label=8)  # 32 rows → 24 train, 4 validation, 4 test
    out = tmp_path / "critic"
    settings = CriticSettings(base_model="tiny", epochs=2, batch_size=4, micro_batch_size=2, learning_rate=1e-2,
                              seed=0)
    assert train_critic_command(path, output=out, settings=settings) == 0
    config = json.loads((out / "adapter_config.json").read_text())
    assert config["peft_type"] == "LORA" and config["r"] == 16 and config["lora_alpha"] == 32
    assert config["task_type"] == "CAUSAL_LM"
    weights = load_file(str(out / "adapter_model.safetensors"))
    assert weights and all("lora_A" in k or "lora_B" in k for k in weights)
    card = json.loads((out / "critic.json").read_text())
    assert card["training_csv"]["sha256"] == sha256_file(path)
    assert (card["split"]["train"], card["split"]["validation"], card["split"]["test"]) == (24, 4, 4)
    # split by question (8 questions × 4 labels): no question's critiques on both sides of a split
    assert card["split"]["questions"] == {"train": 6, "validation": 1, "test": 1}
    assert card["hyperparameters"]["gradient_accumulation"] == 2 and card["optimizer"] == "AdamW (torch)"
    assert card["prompt"] == "plain template" and "--enable-lora" in card["serve"]
    losses = card["step_losses"]
    assert len(losses) == card["steps"] == 12  # 24 rows / 4 per step × 2 epochs
    first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
    assert last < first - 0.5, losses  # measured: first three steps 6.16, last three 2.54 (7.31 → 2.74)
    assert card["test_loss"] is not None and card["epochs"][-1]["val_loss"] < card["epochs"][0]["val_loss"] + 1


def test_cli_train_critic_rejects_bad_csv(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("question,ground_truth,response,critique\nq,g,r,c\nq,,r,c\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "pipeline", "medcode", "train-critic", str(bad), "--base-model",
                           "tiny", "-o", str(tmp_path / "out")], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1
    assert "line 3: ground_truth is empty" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()
