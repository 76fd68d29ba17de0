"""The native trainer: every preset runs two steps and moves every parameter; a killed run resumes
to exactly the weights and metrics of an uninterrupted one; the trainer is deterministic."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from common.config import config_from_dict
from training import rl as rl_module
from training.phases import response_mask_from_ids
from training.presets import PRESETS, get_preset
from training.rl import train


def digit_reward(response: str, gold: str, *, timeout_s: float) -> float:
    """A reward an untrained model earns sometimes, so advantages are non-zero in two steps."""
    return float(sum(ch.isdigit() for ch in response) % 2 == 0)


def _cfg(tiny_env, **rl):
    raw = dict(tiny_env["cfg"].raw)
    raw["rl"] = {**raw["rl"], **rl}
    return config_from_dict(raw)


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def _metrics(run_dir):
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    for r in rows:
        r.pop("time"), r.pop("wall_clock"), r.pop("peak_rss_mb")
    return rows


def test_response_mask_stops_after_first_eos():
    ids = torch.tensor([[5, 6, 0, 0, 0], [5, 6, 7, 8, 9]])
    mask, truncated = response_mask_from_ids(ids, eos_id=0)
    assert mask.tolist() == [[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]]
    assert truncated.tolist() == [False, True]


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_two_steps_of_every_preset_change_every_parameter(tiny_env, tmp_path, name):
    cfg = _cfg(tiny_env, steps=2, checkpoint_every=2)
    train(cfg, get_preset(name), seed=3, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
          run_dir=str(tmp_path), reward_fn=digit_reward)
    before, after = _weights(tiny_env["model"]), _weights(tmp_path / "checkpoints" / "step2")
    unchanged = [k for k in before if torch.equal(before[k], after[k])]
    assert not unchanged, f"{name}: parameters not updated: {unchanged}"
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    assert set(rows[0]["time"]) >= {"rollout", "reward", "old_logp", "credit", "update", "checkpoint", "total"}


class Killed(BaseException):
    """Stands for SIGKILL: raised inside the loop, so nothing after it runs."""


def _train_killed_at(step_killed, monkeypatch, cfg, run_dir, **common):
    """``train`` killed at the rollout of ``step_killed`` (0-based)."""
    real_rollout = rl_module.sample_rollout

    def killed(*args, step, **kwargs):
        if step == step_killed:
            raise Killed
        return real_rollout(*args, step=step, **kwargs)

    monkeypatch.setattr(rl_module, "sample_rollout", killed)
    with pytest.raises(Killed):
        train(cfg, get_preset("dapo"), run_dir=str(run_dir), **common)
    monkeypatch.undo()


def test_killed_run_resumes_to_identical_weights_and_metrics(tiny_env, tmp_path, monkeypatch, capsys):
    straight, resumed = tmp_path / "straight", tmp_path / "resumed"
    common = dict(seed=5, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]), reward_fn=digit_reward)
    cfg = _cfg(tiny_env, steps=4, checkpoint_every=2)
    train(cfg, get_preset("dapo"), run_dir=str(straight), **common)
    _train_killed_at(2, monkeypatch, cfg, resumed, **common)
    # what Snakemake does to the outputs of a killed job before --rerun-incomplete reruns it
    shutil.rmtree(resumed / "checkpoints")
    (resumed / "metrics.jsonl").unlink()
    with open(resumed / "resume" / "metrics.jsonl", "a") as f:
        f.write('{"step": 2, "torn": tr')  # a half-written line from the killed process is dropped
    capsys.readouterr()
    train(cfg, get_preset("dapo"), run_dir=str(resumed), **common)
    assert "resuming dapo seed 5 from step 2" in capsys.readouterr().out
    for step in (2, 4):
        a, b = _weights(straight / "checkpoints" / f"step{step}"), _weights(resumed / "checkpoints" / f"step{step}")
        assert all(torch.equal(a[k], b[k]) for k in a)
    assert _metrics(straight) == _metrics(resumed)
    assert not (resumed / "resume").exists()  # a finished run keeps no resume state (a forced rerun restarts)


def test_resume_state_of_another_config_is_discarded(tiny_env, tmp_path, monkeypatch, capsys):
    common = dict(seed=5, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]), reward_fn=digit_reward)
    _train_killed_at(1, monkeypatch, _cfg(tiny_env, steps=2, checkpoint_every=1), tmp_path, **common)
    capsys.readouterr()
    train(_cfg(tiny_env, steps=2, checkpoint_every=1, lr=3e-3), get_preset("dapo"), run_dir=str(tmp_path), **common)
    out = capsys.readouterr().out
    assert "discarding the resume state" in out and "resuming" not in out


def test_grade_rollout_default_reward_grades_the_batch_through_the_pool() -> None:
    from training.phases import Rollout, grade_rollout

    texts = ["so $\\boxed{\\sqrt{8}}$", "$\\boxed{3}$", "no idea", "$\\boxed{(x+1)^2}$"]

    class Tok:
        def batch_decode(self, seqs, skip_special_tokens=True):
            return [texts[int(s[0])] for s in seqs]

    b = len(texts)
    ro = Rollout(step=0, prompt_ids=torch.zeros(b, 1, dtype=torch.long), prompt_mask=torch.ones(b, 1),
                 response_ids=torch.arange(b).unsqueeze(1), response_mask=torch.ones(b, 1),
                 truncated=torch.zeros(b, dtype=torch.bool), group_ids=torch.zeros(b, dtype=torch.long),
                 golds=("2\\sqrt{2}", "4", "1", "x^2+2x+1"))
    out = grade_rollout(ro, Tok(), timeout_s=10.0)
    assert out.correct.tolist() == [1.0, 0.0, 0.0, 1.0]
