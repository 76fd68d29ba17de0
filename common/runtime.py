"""Process set-up shared by every entry point: torch threads, device, determinism (torch imported on use)."""

from __future__ import annotations

import os
import random
from typing import TYPE_CHECKING

import numpy as np

from common.config import RuntimeConfig

if TYPE_CHECKING:
    import torch


def setup_runtime(cfg: RuntimeConfig) -> torch.device:
    """One torch thread by default: on 2 shared cores, 2 threads were 10x slower on small matmuls."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    import torch

    torch.set_num_threads(cfg.torch_threads)
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # per-shard load/save bars drown the logs of tiny models
    torch.use_deterministic_algorithms(True, warn_only=True)
    return torch.device(cfg.device)


def seed_everything(seed: int) -> torch.Generator:
    """Seed python, numpy and torch; return a torch generator for explicit sampling."""
    import torch

    random.seed(seed)
    np.random.seed(seed % (2**32))
    torch.manual_seed(seed)
    gen = torch.Generator()
    gen.manual_seed(seed)
    return gen
