"""Which training framework a run seems to use, read from its checkpoints and its output, and
the line that framework needs when a stage fails: where plain torch.save code loads by hand,
Lightning and the Hugging Face Trainer each have one argument that does it."""

from __future__ import annotations

import re
from dataclasses import dataclass

from mcp_server.run.preflight.timeline import Event


@dataclass(frozen=True)
class Framework:
    name: str
    load_fix: str  # what makes a restart load the newest checkpoint
    save_fix: str  # what makes it save a resumable checkpoint


HF = Framework(
    "Hugging Face Trainer",
    "call trainer.train(resume_from_checkpoint=True): it loads the newest checkpoint-N under output_dir "
    "(model, optimizer, scheduler, RNG, trainer state); save_model() alone writes weights, no resume point",
    "set save_strategy='steps' with save_steps, and save_total_limit to keep the newest few checkpoint-N folders")
LIGHTNING = Framework(
    "PyTorch Lightning",
    "call trainer.fit(model, ckpt_path='last') (resume_from_checkpoint= on the Trainer is gone since 2.0)",
    "add ModelCheckpoint(save_last=True, every_n_train_steps=...) so last.ckpt always names the newest state")
ACCELERATE = Framework(
    "Hugging Face Accelerate",
    "call accelerator.load_state(<newest dir>) at start and skip the consumed batches (skip_first_batches)",
    "call accelerator.save_state() on a timer; register the scheduler with accelerator.register_for_checkpointing")
TORCH = Framework(
    "plain PyTorch (torch.save)",
    "at start, unconditionally: find the newest checkpoint (by the step stored inside it), torch.load it, restore "
    "model, optimizer, scheduler, scaler and RNG state, and start the loop at step + 1",
    "torch.save the full state (model, optimizer, scheduler, step, RNG) to <name>.tmp, fsync, os.replace to <name>")
GENERIC = Framework(
    "your training loop",
    "load the newest checkpoint unconditionally at start (one code path for a first run and a restart) and "
    "continue from the step stored in it",
    "save the full state on a timer: temp file, fsync, atomic rename")

_HF_LOG = re.compile(r"\{'(?:loss|train_runtime|eval_loss)': ")


def detect(events: list[Event], text: str, command: str) -> Framework:
    """A best guess from the checkpoint names, the output and the command; GENERIC when unsure."""
    names = {e.path.rsplit("/", 1)[-1] for e in events if not e.staging}
    low = (text[-200_000:] + "\n" + command).lower()
    if any(re.fullmatch(r"checkpoint-\d+", n) for n in names) or _HF_LOG.search(text):
        return HF
    if "last.ckpt" in names or any(n.endswith(".ckpt") for n in names) or "lightning" in low:
        return LIGHTNING
    if "accelerate" in low:
        return ACCELERATE
    if any(n.endswith((".pt", ".pth")) for n in names) or "torch" in low:
        return TORCH
    return GENERIC
