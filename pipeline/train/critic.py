"""LoRA fine-tuning of the Med-CoDE critic (§4.1): (question, ground truth, response) → critique.

The paper fine-tunes Phi-3-mini (3.8 B) with LoRA r = 16 for 5 epochs, batch 128, lr 1.41e-5, 8-bit AdamW,
on GPT-4 critiques split 30,000 / 4,409 / 4,410 (train / test / validation). Here:

- prompt = the studio's critic prompt (``steps.medcode.critique_messages``: the system and user texts in
  ``prompts/medcode_critique_*.txt``) rendered with the tokenizer's chat template when it has one (the
  template vLLM applies when serving), else ``PLAIN_TEMPLATE``; target = the critique text and the end of
  the assistant turn. The loss is on the target tokens only (prompt labels are -100);
- LoRA (``peft``) r = 16, alpha 32 (the paper does not give alpha), dropout 0.05, on all linear layers of
  the transformer blocks (``all-linear``; vLLM serves adapters on those); the paper's 5 epochs and lr
  1.41e-5, constant; effective batch 128 by gradient accumulation over micro-batches;
- 8-bit AdamW (bitsandbytes) when a CUDA GPU and bitsandbytes are present, else torch's AdamW;
- the split keeps the paper's proportions (77.3 / 11.4 / 11.4 %), seeded, **by question** as the classifier's
  (``grouped_split``: no question's critiques in two splits, so validation and test loss are not measured on
  near-copies of training rows), labels stratified as far as the groups allow when every row has one;
  validation loss after every epoch and test loss at the end go into the card ``critic.json``.

The output folder is a PEFT adapter (``adapter_config.json`` + ``adapter_model.safetensors``) that
``vllm serve BASE --enable-lora --lora-modules critic=FOLDER`` serves as the model ``critic``.
``tiny`` is a randomly initialised 2-layer Llama built in-process over a word-level vocabulary of the
training text, for tests: nothing is downloaded.
"""

from __future__ import annotations

import json
import math
import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from pipeline.errors import UserError
from pipeline.train.data import (
    grouped_split,
    label_counts,
    question_groups,
    questions_per_split,
    read_labelled_csv,
    sha256_file,
)

CARD = "critic.json"
CARD_FORMAT = "pariksha-medcode-critic/1"
SPLIT = (30_000 / 38_819, 4_410 / 38_819, 4_409 / 38_819)  # train / validation / test, Med-CoDE §4.1
SPLIT_METHOD = ("grouped by question, as the classifier's (`grouped_split`): whole questions in the paper's "
                "77.3 / 11.4 / 11.4 % by sklearn GroupShuffleSplit, seeded, labels stratified as far as the groups "
                "allow")
PAPER = {"base_model": "microsoft/Phi-3-mini-4k-instruct", "lora_r": 16, "epochs": 5, "batch_size": 128,
         "learning_rate": 1.41e-5, "optimizer": "AdamW 8-bit", "split": [30_000, 4_410, 4_409]}
PLAIN_TEMPLATE = "### System:\n{system}\n\n### User:\n{user}\n\n### Critique:\n"
COLUMNS = ("question", "ground_truth", "response", "critique")
INIT_RANGE = 0.3  # tiny: embeddings large enough that LoRA can move the (tied, frozen) output logits


@dataclass(frozen=True)
class CriticSettings:
    base_model: str = "tiny"
    epochs: int = 5
    batch_size: int = 128  # effective batch: micro_batch_size × gradient accumulation
    micro_batch_size: int = 4
    learning_rate: float = 1.41e-5
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    target_modules: str | tuple[str, ...] = "all-linear"
    max_length: int = 1024
    max_steps: int | None = None  # stop after this many optimizer steps (smoke runs)
    seed: int = 0

    def check(self) -> CriticSettings:
        if (self.epochs < 1 or self.batch_size < 1 or self.micro_batch_size < 1 or self.lora_r < 1
                or self.lora_alpha <= 0 or not 0 <= self.lora_dropout < 1 or self.learning_rate <= 0
                or self.max_length < 16 or (self.max_steps is not None and self.max_steps < 1)):
            raise UserError("train-critic: epochs, batch sizes, LoRA r ≥ 1; alpha and learning rate > 0; "
                            "0 ≤ dropout < 1; max length ≥ 16; max steps ≥ 1")
        if self.batch_size % self.micro_batch_size:
            raise UserError(f"train-critic: batch size {self.batch_size} is not a multiple of the micro-batch "
                            f"size {self.micro_batch_size}")
        return self

    @property
    def accumulation(self) -> int:
        return self.batch_size // self.micro_batch_size


def tiny_tokenizer(texts: Sequence[str]):
    """A lower-cased word-level tokenizer whose vocabulary is the words and punctuation of ``texts`` (plus
    [PAD] [UNK] [BOS] [EOS]); no chat template, so prompts use ``PLAIN_TEMPLATE``."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    pre, norm = pre_tokenizers.Whitespace(), normalizers.Lowercase()
    words = sorted({w for t in texts for w, _ in pre.pre_tokenize_str(norm.normalize_str(t))})
    vocab = {w: i for i, w in enumerate(["[PAD]", "[UNK]", "[BOS]", "[EOS]", *words])}
    core = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    core.normalizer, core.pre_tokenizer = norm, pre
    return PreTrainedTokenizerFast(tokenizer_object=core, pad_token="[PAD]", unk_token="[UNK]", bos_token="[BOS]",
                                   eos_token="[EOS]")


def tiny_causal_lm(texts: Sequence[str], seed: int = 0):
    """(tokenizer, model): a randomly initialised Llama (hidden size 64, 2 layers, 4 heads) over
    ``tiny_tokenizer(texts)``, built in-process for tests; nothing is downloaded."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tokenizer = tiny_tokenizer(texts)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, tie_word_embeddings=True,
                         initializer_range=INIT_RANGE)
    torch.manual_seed(seed)
    return tokenizer, LlamaForCausalLM(config)


def _base_model(base_model: str, seed: int, texts: Sequence[str]):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if base_model == "tiny":
        return tiny_causal_lm(texts, seed)
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = Path(base_model).expanduser()
    if not (path / "config.json").is_file():
        raise UserError(f"--base-model {base_model}: use 'tiny' or a local causal-LM folder (one with config.json, "
                        "e.g. a download of microsoft/Phi-3-mini-4k-instruct)")
    tokenizer = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    return tokenizer, AutoModelForCausalLM.from_pretrained(str(path), local_files_only=True)


def critic_messages(question: str, ground_truth: str, response: str) -> tuple[dict, ...]:
    """The studio's critic prompt for one row (``steps.medcode.critique_messages``)."""
    from pipeline.dataset import Query
    from pipeline.steps.medcode import critique_messages

    return critique_messages(Query(query_id="train", language="en", query=question, gt_response=ground_truth),
                             response)


def encode_example(tokenizer, messages: Sequence[dict], critique: str) -> tuple[list[int], list[int]]:
    """(input_ids, labels) of one prompt → critique pair; labels are -100 on the prompt tokens.

    With a chat template the target is what the template adds for the assistant turn (the critique and its
    end-of-turn marker); without one, the plain template's prompt and the critique plus the EOS token.
    """
    if getattr(tokenizer, "chat_template", None):
        prompt = tokenizer.apply_chat_template(list(messages), tokenize=False, add_generation_prompt=True)
        full = tokenizer.apply_chat_template([*messages, {"role": "assistant", "content": critique}],
                                             tokenize=False)
        if not full.startswith(prompt):
            raise UserError("train-critic: the tokenizer's chat template does not extend the generation prompt "
                            "with the assistant turn; cannot tell prompt from target")
        target = full[len(prompt):]
        prompt_ids = tokenizer(prompt, add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(target, add_special_tokens=False)["input_ids"]
    else:
        system = next((m["content"] for m in messages if m["role"] == "system"), "")
        user = "\n\n".join(m["content"] for m in messages if m["role"] == "user")
        prompt_ids = tokenizer(PLAIN_TEMPLATE.format(system=system, user=user), add_special_tokens=False)["input_ids"]
        target_ids = tokenizer(critique, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    return prompt_ids + target_ids, [-100] * len(prompt_ids) + target_ids


def _batches(examples: Sequence[tuple[list[int], list[int]]], size: int, pad_id: int):
    import torch

    for start in range(0, len(examples), size):
        chunk = examples[start:start + size]
        width = max(len(ids) for ids, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        labels = torch.full((len(chunk), width), -100, dtype=torch.long)
        mask = torch.zeros((len(chunk), width), dtype=torch.long)
        for row, (x, y) in enumerate(chunk):
            ids[row, :len(x)], labels[row, :len(y)], mask[row, :len(x)] = torch.tensor(x), torch.tensor(y), 1
        yield {"input_ids": ids, "attention_mask": mask, "labels": labels}


def _target_tokens(batch) -> int:
    return int((batch["labels"][:, 1:] != -100).sum())


def _mean_loss(model, examples, size: int, pad_id: int, device) -> float | None:
    """Token-weighted mean loss of the target tokens (None when there are no examples)."""
    import torch

    if not examples:
        return None
    model.eval()
    total, tokens = 0.0, 0
    with torch.no_grad():
        for batch in _batches(examples, size, pad_id):
            n = _target_tokens(batch)
            total += float(model(**{k: v.to(device) for k, v in batch.items()}).loss) * n
            tokens += n
    model.train()
    return total / max(tokens, 1)


def _optimizer(params, lr: float, device) -> tuple[object, str]:
    import torch

    if device.type == "cuda":
        try:
            import bitsandbytes as bnb

            return bnb.optim.AdamW8bit(params, lr=lr), "AdamW 8-bit (bitsandbytes)"
        except ImportError:
            pass
    return torch.optim.AdamW(params, lr=lr), "AdamW (torch)"


def train_critic(rows: Sequence[dict], output: Path, settings: CriticSettings | None = None, *,
                 source: dict | None = None, console=None) -> dict:
    """LoRA-fine-tune a causal LM to write ``critique`` for (question, ground_truth, response) rows; save the
    adapter and the card ``critic.json`` in ``output``. Returns the card."""
    import torch
    from peft import LoraConfig, get_peft_model

    from pipeline.console import make_console, progress_bar

    settings = (settings or CriticSettings()).check()
    console = console or make_console(stderr=True)
    started = time.perf_counter()
    labels = [r.get("label_index") for r in rows]
    strat = labels if all(y is not None for y in labels) else None
    groups = question_groups(rows)  # as the classifier: no question's critiques in two splits
    train_ix, val_ix, test_ix = grouped_split(strat or [0] * len(rows), groups, SPLIT, settings.seed,
                                              source=(source or {}).get("path", "training data"))
    prompts = [critic_messages(r["question"], r["ground_truth"], r["response"]) for r in rows]
    texts = [m["content"] for msgs in prompts for m in msgs] + [PLAIN_TEMPLATE] + [r["critique"] for r in rows]
    tokenizer, base = _base_model(settings.base_model, settings.seed, texts)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    encoded, too_long = {}, []
    for i, (r, messages) in enumerate(zip(rows, prompts, strict=True)):
        ids, lab = encode_example(tokenizer, messages, r["critique"])
        if len(ids) > settings.max_length:
            too_long.append(r.get("line", i))
        else:
            encoded[i] = (ids, lab)
    pick = lambda ix: [encoded[i] for i in ix if i in encoded]  # noqa: E731
    train, val, test = pick(train_ix), pick(val_ix), pick(test_ix)
    if not train:
        raise UserError(f"train-critic: no training row fits in --max-length {settings.max_length} tokens")
    if too_long:
        console.print(f"[yellow]skipped {len(too_long)} row(s) longer than {settings.max_length} tokens[/] "
                      f"(lines {', '.join(map(str, too_long[:10]))}{' …' if len(too_long) > 10 else ''})")

    lora = LoraConfig(r=settings.lora_r, lora_alpha=settings.lora_alpha, lora_dropout=settings.lora_dropout,
                      target_modules=(settings.target_modules if isinstance(settings.target_modules, str)
                                      else list(settings.target_modules)), task_type="CAUSAL_LM", bias="none")
    torch.manual_seed(settings.seed)
    model = get_peft_model(base, lora).to(device)
    model.train()
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total_params = sum(p.numel() for p in model.parameters())
    optimizer, optimizer_name = _optimizer([p for p in model.parameters() if p.requires_grad],
                                           settings.learning_rate, device)
    pad_id = tokenizer.pad_token_id
    generator = torch.Generator().manual_seed(settings.seed)
    steps_per_epoch = math.ceil(len(train) / settings.batch_size)
    planned = settings.epochs * steps_per_epoch
    total_steps = min(planned, settings.max_steps or planned)
    step_losses, epochs = [], []
    with progress_bar(console, eta=False, transient=True) as progress:
        task = progress.add_task("train-critic", total=total_steps)
        for epoch in range(1, settings.epochs + 1):
            if len(step_losses) >= total_steps:
                break
            order = torch.randperm(len(train), generator=generator).tolist()
            for start in range(0, len(train), settings.batch_size):
                if len(step_losses) >= total_steps:
                    break
                step = [train[i] for i in order[start:start + settings.batch_size]]
                micro = list(_batches(step, settings.micro_batch_size, pad_id))
                tokens = sum(_target_tokens(b) for b in micro)
                optimizer.zero_grad()
                step_loss = 0.0
                for batch in micro:  # token-weighted: the step's loss is the mean over all its target tokens
                    loss = model(**{k: v.to(device) for k, v in batch.items()}).loss
                    share = _target_tokens(batch) / max(tokens, 1)
                    (loss * share).backward()
                    step_loss += float(loss.detach()) * share
                optimizer.step()
                step_losses.append(step_loss)
                progress.update(task, advance=1, description=f"epoch {epoch}/{settings.epochs} loss {step_loss:.3f}")
            val_loss = _mean_loss(model, val, settings.micro_batch_size, pad_id, device)
            epochs.append({"epoch": epoch, "steps": len(step_losses), "train_loss": step_losses[-1],
                           "val_loss": val_loss})
            console.print(f"epoch {epoch}/{settings.epochs}: last step loss {step_losses[-1]:.4f}"
                          + (f", validation loss {val_loss:.4f}" if val_loss is not None else ""), highlight=False)
    test_loss = _mean_loss(model, test, settings.micro_batch_size, pad_id, device)
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    (output / CARD).unlink(missing_ok=True)
    model.save_pretrained(str(output))
    import peft
    import transformers

    card = {
        "format": CARD_FORMAT,
        "base_model": settings.base_model if settings.base_model == "tiny" else card_base(settings.base_model),
        "prompt": "chat template" if getattr(tokenizer, "chat_template", None) else "plain template",
        "hyperparameters": {**asdict(settings), "target_modules": settings.target_modules,
                            "gradient_accumulation": settings.accumulation},
        "lora_target_modules": sorted(model.peft_config["default"].target_modules),
        "optimizer": optimizer_name, "device": device.type, "paper": PAPER,
        "parameters": {"trainable": trainable, "total": total_params},
        "training_csv": source or {},
        "split": {"seed": settings.seed, "method": SPLIT_METHOD,
                  "stratified_by": "label, as far as the question groups allow" if strat is not None else None,
                  "questions": questions_per_split(groups, train_ix, val_ix, test_ix),
                  "proportions": list(SPLIT), "train": len(train), "validation": len(val), "test": len(test),
                  "skipped_too_long": too_long,
                  "label_counts": {"train": label_counts([labels[i] for i in train_ix])} if strat else {}},
        "steps": len(step_losses), "step_losses": step_losses, "epochs": epochs, "test_loss": test_loss,
        "seconds": round(time.perf_counter() - started, 1),
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__},
        "serve": f"vllm serve {card_base(settings.base_model)} --enable-lora --max-lora-rank {settings.lora_r} "
                 f"--lora-modules critic={output.resolve()}",
    }
    (output / CARD).write_text(json.dumps(card, indent=2))
    return card


def card_base(base_model: str) -> str:
    return "BASE_MODEL" if base_model == "tiny" else str(Path(base_model).expanduser().resolve())


def train_critic_command(csv_path: Path, *, output: Path, settings: CriticSettings | None = None) -> int:
    """CLI entry of ``medcode train-critic``: read the CSV (bad rows → UserError), train, save the adapter."""
    from pipeline.console import make_console

    console = make_console(stderr=True)
    settings = (settings or CriticSettings()).check()
    rows = read_labelled_csv(Path(csv_path), COLUMNS, label_required=False)
    source = {"path": str(csv_path), "sha256": sha256_file(Path(csv_path)), "rows": len(rows)}
    card = train_critic(rows, Path(output), settings, source=source, console=console)
    test = f"test loss {card['test_loss']:.4f}" if card["test_loss"] is not None else "no test rows"
    console.print(f"trained a LoRA critic adapter ({card['parameters']['trainable']:,} trainable parameters) in "
                  f"{card['steps']} steps, {card['seconds']:.0f} s: loss {card['step_losses'][0]:.4f} → "
                  f"{card['step_losses'][-1]:.4f}, {test}; saved to {output}. Serve it with: {card['serve']}",
                  highlight=False)
    return 0
