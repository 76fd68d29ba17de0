"""An optional learned critic (PPO with a value function, as VAPO sets it up: arXiv 2504.05118 §3; verl's GAE and
``compute_value_loss``): a value head V(h) = w.h + b on the policy's LM-head input h at theta_old (captured by
phase 3, ``needs=("hidden",)``), trained on its own optimizer with the clipped value loss towards GAE returns with
its own lambda (``lam_critic``, VAPO 1.0), while the policy's advantages use another (``lam_policy`` or VAPO's
length-adaptive ``lam_alpha``; ``training.credit.advantage.gae``). Departures: training/ALGORITHMS.md, PPO-critic.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

import torch
from torch import Tensor

from training import losses
from training.credit.advantage import token_rewards_of


class Critic:
    """Value head + its optimizer; ``values`` at theta_old before the credit phase, ``update`` after the policy's."""

    def __init__(self, hidden_size: int, knobs: Mapping[str, Any], *, lr: float) -> None:
        self.head = torch.nn.Linear(hidden_size, 1)
        torch.nn.init.zeros_(self.head.weight), torch.nn.init.zeros_(self.head.bias)  # V = 0: GRPO-free start
        self.gamma, self.lam, self.clip = float(knobs["gamma"]), float(knobs["lam_critic"]), float(knobs["value_clip"])
        self.opt = torch.optim.AdamW(self.head.parameters(), lr=lr * float(knobs["value_lr_scale"]), weight_decay=0.0)

    def values(self, hidden: Tensor) -> Tensor:
        """V [B, R] of the LM-head inputs h [B, R, H] (no grad)."""
        with torch.no_grad():
            return self.head(hidden.float()).squeeze(-1)

    def update(self, hidden: Tensor, values: Tensor, rewards: Tensor, mask: Tensor) -> dict[str, float]:
        """One optimizer step of the clipped value loss (token mean) towards GAE(lam_critic) returns."""
        mask = mask.float()
        _, returns = losses.gae(token_rewards_of(rewards, mask), values, mask, gamma=self.gamma, lam=self.lam)
        vpreds = self.head(hidden.float()).squeeze(-1)
        loss = losses.aggregate(losses.value_loss(vpreds, returns, values, clip=self.clip), mask, "token_mean",
                                num_tokens=float(mask.sum()), num_seqs=float((mask.sum(-1) > 0).sum()))
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        n = float(mask.sum().clamp(min=1.0))
        return {"value_loss": float(loss), "value_mean": float((values * mask).sum()) / n,
                "return_mean": float((returns * mask).sum()) / n}

    def state_dict(self) -> dict[str, Any]:
        return {"head": self.head.state_dict(), "opt": self.opt.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        self.head.load_state_dict(state["head"])
        self.opt.load_state_dict(state["opt"])


def checkpoint_critic(preset: Any, model: Any, model_dir: str | Path) -> Critic | None:
    """The critic of a checkpoint for offline studies: the head saved in its ``state.pt`` (the loop's resume state,
    published with the checkpoint), or a fresh zero head (V = 0) where there is none (the SFT checkpoint)."""
    if not preset.critic:
        return None
    critic = Critic(model.config.hidden_size, preset.critic, lr=0.0)
    state = Path(model_dir) / "state.pt"
    if state.exists():
        saved = torch.load(state, weights_only=False).get("critic")
        if saved is not None:
            critic.head.load_state_dict(saved["head"])
    return critic


def make_critic(preset: Any, hidden_size: int, *, lr: float, state: Mapping[str, Any] | None = None) -> Critic | None:
    """The loop's critic: None for a preset without one, else a value head (restored from a resume ``state``)."""
    if not preset.critic:
        return None
    critic = Critic(hidden_size, preset.critic, lr=lr)
    if state is not None:
        critic.load_state_dict(state["critic"])
    return critic


def critic_update(critic: Critic | None, hidden: Tensor, values: Tensor | None, rewards: Tensor,
                  mask: Tensor) -> dict[str, float]:
    """The value head's step after the policy's, on the same batch (its own optimizer); {} without a critic."""
    return {} if critic is None else critic.update(hidden, values, rewards, mask)


def critic_state(critic: Critic | None) -> dict[str, Any]:
    """The critic's part of the loop's resume state."""
    return {} if critic is None else {"critic": critic.state_dict()}
