"""Credit fidelity (issue 16): exact ground truth of the synthetic task, the metrics on constructed cases
with known answers (ρ = 1 for weights equal to the ground truth, ρ ≈ 0 for random weights, CF > 0 >
inverted CF), Monte-Carlo importance, and the whole run on a tiny model."""

from __future__ import annotations

import dataclasses
import math
import re

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from common.config import config_from_dict
from common.io import read_jsonl
from training import data
from training.credit import CreditBatch, get_token_weight_fn
from training.credit.gradsnr import effective_credit
from training.presets import get_preset
from training.studies import fidelity as fd
from training.studies import importance as gt
from training.studies import mc_importance as mci

pytestmark = pytest.mark.timeout(300)

S, OP, R, A, SL, F, O = gt.SCAFFOLDING, gt.OPERAND, gt.RESULT, gt.ANSWER, gt.SLIP, gt.FORMAT, gt.OTHER  # noqa: E741  (token-class initials)
Q = "Sam has 7 pens. Sam gets 5 more and then gives away 3. How many pens does Sam have?"
SCAF = " Let's think step by step."


def pieces_of(text: str) -> list[str]:
    """Word-ish tokens with digits split, as the tiny tokenizer does."""
    return re.findall(r"\s?\d|\s?[A-Za-z']+|\s?\\boxed|\s?\S", text)


def truth(text: str, correct: bool, question: str = Q) -> list[tuple[str, str, float]]:
    p = pieces_of(text)
    c, g = gt.synthetic_importance(question, p, correct)
    return [(x.strip(), cl, v) for x, cl, v in zip(p, c, g) if cl != S]


def decisive(rows) -> list[tuple[str, float]]:
    return [(x, v) for x, _, v in rows if v != 0]


# ------------------------------------------------------------------------------ exact ground truth


def test_parse_question_and_answer() -> None:
    q = gt.parse_question("Question: " + Q + "\nAnswer:")
    assert q == gt.Question(7, (("+", 5), ("-", 3))) and q.answer == 9
    assert gt.parse_question("What is 2 + 2?") is None


def test_right_solution_every_unit_decisive() -> None:
    rows = truth(SCAF + " 7 + 5 = 12. 12 - 3 = 9. \\boxed{9}", True)
    assert decisive(rows) == [(x, 1.0) for x in ("7", "+", "5", "1", "2", "1", "2", "-", "3", "9", "9")]
    assert [cl for x, cl, _ in rows if x in ("=", ".", "\\boxed", "{", "}")] == [F] * 7
    assert [cl for x, cl, _ in rows if x == "9"] == [R, A]


@pytest.mark.parametrize(("text", "slip"), [
    pytest.param(" 7 + 5 = 13. 13 - 3 = 10. \\boxed{10}", ["1", "3"], id="result slip carried forward"),
    pytest.param(" 7 + 5 = 12. 13 - 3 = 10. \\boxed{10}", ["1", "3"], id="copy slip: left operand"),
    pytest.param(" 7 + 4 = 11. 11 - 3 = 8. \\boxed{8}", ["4"], id="operand misread"),
    pytest.param(" 7 + 5 = 12. 12 - 3 = 9. \\boxed{8}", ["8"], id="boxed value only"),
])
def test_wrong_solution_with_one_slip(text: str, slip: list[str]) -> None:
    rows = truth(SCAF + text, False)
    assert decisive(rows) == [(x, -1.0) for x in slip]
    assert [x for x, cl, _ in rows if cl == SL] == slip


@pytest.mark.parametrize("text", [
    pytest.param(" 7 + 5 = 13. 13 - 3 = 11. \\boxed{11}", id="two slips"),
    pytest.param(" 7 + 5 = 12. \\boxed{12}", id="a calculation missing"),
    pytest.param(" 7 + 5 = 12. 12 - 3 = 9.", id="no boxed answer"),
    pytest.param(" I do not know. \\boxed{3}", id="no chain"),
])
def test_wrong_solution_without_a_single_decisive_token(text: str) -> None:
    assert decisive(truth(SCAF + text, False)) == []


def test_unparseable_question_is_all_other() -> None:
    rows = truth(SCAF + " 2 + 2 = 4. \\boxed{4}", True, question="What is 2 + 2?")
    assert {cl for _, cl, _ in rows} == {O} and decisive(rows) == []


@pytest.mark.parametrize("slip_prob,repeats", [(0.0, 0), (1.0, 0), (0.0, 6), (1.0, 6)])
def test_generator_solutions(slip_prob: float, repeats: int) -> None:
    """Every generated solution: right -> +1 exactly on its numbers and operators; slipped -> -1 exactly on
    the one slipped number (the generator's own error model); long scaffolding (restatements) is 0."""
    cfg = dataclasses.replace(config_from_dict({"experiment": "t", "output_dir": "x", "seeds": [1],
                                                "methods": ["dapo"]}).task,
                              slip_prob=slip_prob, n_train=60, n_heldout=1, scaffold_repeats=repeats)
    for p in data.make_splits(cfg)[0]:
        correct = p.solution.endswith(f"{{{p.answer}}}")
        assert correct == (slip_prob == 0.0)
        rows = truth(p.solution, correct, p.question)
        if repeats:  # truth() keeps the non-scaffolding tokens: the restatements are scaffolding
            assert len(pieces_of(p.solution)) - len(rows) > 10 * repeats
        if correct:
            assert all((v == 1.0) == bool(re.fullmatch(r"\d|[+-]", x)) for x, _, v in rows), rows
        else:
            slipped = [x for x, cl, v in rows if v == -1.0]
            assert slipped and all(cl == SL for x, cl, v in rows if v == -1.0)
            assert sum(v != 0 for _, _, v in rows) == len(slipped) <= 2  # one number, 1-2 digits


# ------------------------------------------------------------------------------ metrics


def test_spearman_matches_scipy_and_edge_cases() -> None:
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=30), rng.integers(0, 3, size=30)
    assert fd.spearman(x, y) == pytest.approx(spearmanr(x, y).statistic)
    assert fd.spearman([1, 1, 1], [0, 1, 0]) == 0.0  # constant credit: no order
    assert fd.spearman([1, 2, 3], [0, 0, 0]) is None  # nothing to rank against


def test_top_overlap_identity_chance_and_reversal() -> None:
    g = [0.0] * 17 + [1.0] * 3  # L = 20, k = 2, |D| = 3
    assert fd.top_overlap(g, g) == 1.0
    assert fd.top_overlap([1.0] * 20, g) == pytest.approx(3 / 20)  # chance: max(k, |D|) / L
    assert fd.top_overlap([1.0 - v for v in g], g) == 0.0
    assert fd.top_overlap([5.0] + [0.0] * 19, [1.0] + [0.0] * 19) == 1.0  # |D| < k: recall of D
    assert fd.top_overlap([0.0, 1.0], [1.0, 1.0]) is None


def test_effective_credit_is_advantage_times_weight_times_normaliser() -> None:
    adv = torch.tensor([1.0, -0.5, 2.0])
    mask = torch.tensor([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]).float()
    w = torch.tensor([[1.0, 2.0, 0.5, 9.0], [1.5, 1.0, 9.0, 9.0], [1.0, 1.0, 1.0, 1.0]])
    c = effective_credit(get_preset("dapo"), adv, w, mask, max_len=4)  # token_mean over 5 tokens
    torch.testing.assert_close(c, adv[:, None] * w * mask / 5)
    c = effective_credit(get_preset("grpo"), adv, w, mask, max_len=4)  # seq mean of token means, 2 seqs
    torch.testing.assert_close(c, adv[:, None] * w * mask / mask.sum(-1, keepdim=True).clamp(min=1) / 2)
    c = effective_credit(get_preset("dr_grpo"), adv, w, mask, max_len=4)
    torch.testing.assert_close(c, adv[:, None] * w * mask / (4 * 2))


def synthetic_batch(n: int, seed: int = 0):
    """n generated solutions of the default task (about half slipped), as token pieces with their exact
    importance; advantages: +1 for right, -1 for wrong solutions."""
    cfg = dataclasses.replace(config_from_dict({"experiment": "t", "output_dir": "x", "seeds": [1],
                                                "methods": ["dapo"]}).task,
                              n_train=n, n_heldout=1, seed=seed)
    rows = []
    for p in data.make_splits(cfg)[0]:
        correct = p.solution.endswith(f"{{{p.answer}}}")
        pieces = pieces_of(p.solution)
        rows.append((pieces, gt.synthetic_importance(p.question, pieces, correct)[1], correct))
    L = max(len(p) for p, _, _ in rows)
    mask = torch.zeros(len(rows), L)
    g = torch.zeros(len(rows), L)
    for i, (p, imp, _) in enumerate(rows):
        mask[i, : len(p)] = 1.0
        g[i, : len(p)] = torch.tensor(imp)
    adv = torch.tensor([1.0 if c else -1.0 for _, _, c in rows])
    return rows, mask, g, adv


def test_weights_equal_to_the_ground_truth_give_rho_one() -> None:
    rows, mask, g, adv = synthetic_batch(40)
    credit = effective_credit(get_preset("dapo"), adv, g.abs(), mask, max_len=mask.shape[1])
    recs = fd.batch_fidelity(1, credit, [imp for _, imp, _ in rows], mask, adv)
    assert len(recs) == 40 and 0 < sum(r.rho is not None for r in recs) <= 40
    assert all(r.rho == pytest.approx(1.0) for r in recs if r.rho is not None)
    assert all(r.overlap == pytest.approx(1.0) for r in recs if r.overlap is not None)
    summary = fd.summarise(recs, n_boot=200, seed=0)
    assert summary["rho"] == pytest.approx(1.0) and summary["decisive_share"] == pytest.approx(1.0)
    # the sign matters: w = g itself flips the credit of wrong responses (A < 0, g <= 0)
    flipped = fd.batch_fidelity(1, effective_credit(get_preset("dapo"), adv, g, mask, max_len=mask.shape[1]),
                                [imp for _, imp, _ in rows], mask, adv)
    assert any(r.rho == pytest.approx(-1.0) for r in flipped if r.rho is not None)


def test_uniform_and_random_weights_give_rho_zero_within_interval() -> None:
    rows, mask, _, adv = synthetic_batch(300, seed=3)
    imps = [imp for _, imp, _ in rows]
    batch = CreditBatch(prompt_ids=torch.ones(len(rows), 2, dtype=torch.long), prompt_mask=torch.ones(len(rows), 2),
                        response_ids=torch.ones(mask.shape, dtype=torch.long), response_mask=mask,
                        old_logp=torch.zeros(mask.shape), entropy=torch.zeros(mask.shape), advantages=adv,
                        group_ids=torch.arange(len(rows)) // 4, hidden=None, pad_token_id=0, tokenizer=None,
                        logp_fn=None, generator=torch.Generator().manual_seed(7))
    preset = get_preset("delta_random")
    w = get_token_weight_fn(preset.token_weights)(batch, **preset.knobs) * mask
    s = fd.summarise(fd.batch_fidelity(1, effective_credit(preset, adv, w, mask, 64), imps, mask, adv),
                     n_boot=500, seed=0)
    assert s["rho_lo"] < 0 < s["rho_hi"] and s["rho_hi"] - s["rho_lo"] < 0.2
    share = s["decisive_token_share"]
    assert s["decisive_share_lo"] < share < s["decisive_share_hi"]
    u = fd.summarise(fd.batch_fidelity(1, effective_credit(get_preset("dapo"), adv, mask, mask, 64), imps,
                                       mask, adv), n_boot=100, seed=0)
    assert u["rho"] == 0.0 and u["decisive_share"] == pytest.approx(u["decisive_token_share"])


def test_bootstrap_resamples_seeds() -> None:
    def recs(seed, rho, n=30):
        return [fd.ResponseFidelity(seed, rho + 0.01 * (j % 3), None, 1.0, 2.0, 4, 2) for j in range(n)]

    one = fd.bootstrap(recs(1, 0.5) + recs(1, 0.5), n_boot=300, seed=0)["rho"]
    two = fd.bootstrap(recs(1, 0.0) + recs(2, 1.0), n_boot=300, seed=0)["rho"]
    assert one[1] - one[0] < 0.02 and two[1] - two[0] > 0.5  # between-seed spread enters the interval
    assert fd.bootstrap(recs(1, 0.5), n_boot=50, seed=4) == fd.bootstrap(recs(1, 0.5), n_boot=50, seed=4)
    assert fd.bootstrap([], n_boot=50, seed=0)["rho"] == (None, None)


def test_bootstrap_resamples_prompt_groups_whole() -> None:
    # 8 prompt groups of 4 responses that share their group's rho: the groups are the independent units
    recs = [fd.ResponseFidelity(1, float(g % 2), None, 1.0, 2.0, 4, 2, group=g) for g in range(8) for _ in range(4)]
    flat = [dataclasses.replace(r, group=None) for r in recs]
    grouped, alone = (fd.bootstrap(x, n_boot=400, seed=0)["rho"] for x in (recs, flat))
    assert grouped[1] - grouped[0] > 1.5 * (alone[1] - alone[0])  # 8 units, not 32


# ------------------------------------------------------------------------------ CF vs inverted CF


def right_and_slipped(question: str) -> tuple[str, str]:
    """The worked solution of a synthetic question, and the same with its first result one too high
    (carried forward, as the generator's slips)."""
    q = gt.parse_question(question)
    out = []
    for slip in (0, 1):
        value, spans = q.start, []
        for k, (op, b) in enumerate(q.steps):
            r = (value + b if op == "+" else value - b) + (slip if k == 0 else 0)
            spans.append(f"{value} {op} {b} = {r}.")
            value = r
        out.append(f" {data.SCAFFOLD} " + " ".join(spans) + f" \\boxed{{{value}}}")
    return out[0], out[1]


@pytest.fixture(scope="module")
def tokenizer(tiny_env):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tiny_env["model"], padding_side="left")


def encode_rows(tokenizer, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [tokenizer(t, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id] for t in texts]
    width = max(map(len, rows))
    ids = torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])
    mask = torch.tensor([[1.0] * len(r) + [0.0] * (width - len(r)) for r in rows])
    return ids, mask


def cf_rhos(tokenizer, drop_of_calc: tuple[float, float],
            weights: dict[str, torch.Tensor] | None = None) -> dict[str, list[float]]:
    """Per-response rho of cf and cf_inverted on [right, slipped, right, slipped] of Q under a stub policy
    whose answer log-prob falls by ``drop_of_calc[k]`` nats when calculation k is masked (the scaffold
    costs nothing); ``(0, 0)`` gives CF no counterfactual signal at all (every drop 0: imp 0.5). With
    ``weights`` each preset's token weights are stored there too."""
    from training.credit.cf import token_pieces

    right, wrong = right_and_slipped(Q)
    ids, mask = encode_rows(tokenizer, [right, wrong, right, wrong])
    eq = tokenizer.convert_tokens_to_ids(tokenizer.tokenize(" =")[-1])

    at = (ids[0] == eq).nonzero().flatten().tolist()  # the two calculations' '=' (same in every row)
    assert len(at) == 2 and all((ids[i] == eq).nonzero().flatten().tolist() == at for i in range(4))

    def logp_fn(p_ids, p_mask, r_ids, r_mask):
        out = torch.full(r_ids.shape, -0.5)
        for k, pos in enumerate(at):
            out[r_ids[:, pos] != eq] -= drop_of_calc[k]  # calculation k masked
        return out

    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    batch = CreditBatch(prompt_ids=torch.ones(4, 2, dtype=torch.long), prompt_mask=torch.ones(4, 2, dtype=torch.long),
                        response_ids=ids, response_mask=mask, old_logp=torch.zeros(mask.shape),
                        entropy=torch.zeros(mask.shape), advantages=adv, group_ids=torch.zeros(4, dtype=torch.long),
                        hidden=None, pad_token_id=tokenizer.pad_token_id, tokenizer=tokenizer, logp_fn=logp_fn,
                        generator=torch.Generator().manual_seed(0))
    imps = [gt.synthetic_importance(Q, token_pieces(ids[i, : int(mask[i].sum())].tolist(), tokenizer),
                                    adv[i] > 0)[1] for i in range(4)]
    assert sum(v == -1 for v in imps[1]) >= 1 and sum(v == 1 for v in imps[0]) >= 9
    rho = {}
    for name in ("cf", "cf_inverted", "cf_prior"):
        preset = get_preset(name)
        w = get_token_weight_fn(preset.token_weights)(batch, **preset.knobs) * mask
        if weights is not None:
            weights[name] = w
        recs = fd.batch_fidelity(1, effective_credit(preset, adv, w, mask, 64), imps, mask, adv)
        assert all(r.rho is not None for r in recs)
        rho[name] = [r.rho for r in recs]
    return rho


def test_cf_rho_positive_inverted_cf_negative(tokenizer) -> None:
    """A policy whose answer depends on both calculations (masking either costs 2 nats of answer log-prob,
    masking the scaffold nothing): CF's credit ranks with the exact importance, inverted CF against it."""
    rho = cf_rhos(tokenizer, (2.0, 2.0))
    assert all(r > 0.2 for r in rho["cf"]) and all(r < -0.1 for r in rho["cf_inverted"]), rho


def test_inverted_cf_mirrors_cf_gain_over_its_structural_prior(tokenizer) -> None:
    """Why inverted CF can have rho > 0 (default DAG, SFT checkpoint: CF +0.27, inverted +0.08).

    CF's weights are a structural prior that no counterfactual signal enters (formatting tokens '=' '-'
    x0.1, the answer region at answer_weight 1.5 below every reasoning token, EOS 1) plus the span order of
    the reasoning region; ``inverted`` mirrors only the latter (as the reference's ablation). The prior
    alone (every drop 0) already ranks with the exact importance (rho > 0), and inversion moves rho from
    the prior by the opposite of CF's move, not to -rho(CF). When only the last calculation moves the
    answer (the SFT policy: masking it costs ~6.7 nats, masking the scaffold or the first calculation
    < 0.05 nats on 97 % of spans, since the boxed value copies the last written result), CF's signal is
    only partly aligned with the exact truth (every unit of a right solution, or an early slip, is
    decisive), so CF's gain is small and on an early slip negative: inverted rho > 0 there."""
    prior = cf_rhos(tokenizer, (0.0, 0.0))
    assert prior["cf"] == prior["cf_inverted"] and all(r > 0 for r in prior["cf"]), prior  # no signal: equal
    for drops in ((2.0, 2.0), (0.0, 6.7)):
        rho = cf_rhos(tokenizer, drops)
        for cf_rho, inv_rho, base in zip(rho["cf"], rho["cf_inverted"], prior["cf"]):
            assert (cf_rho - base) * (inv_rho - base) < 0, (drops, rho, prior)  # opposite moves
    last = cf_rhos(tokenizer, (0.0, 6.7))
    assert last["cf"][0] > prior["cf"][0] > last["cf_inverted"][0]  # right solution: CF gains
    assert last["cf_inverted"][1] > prior["cf"][1] > last["cf"][1] and last["cf_inverted"][1] > 0  # first-calc slip


def test_cf_prior_is_cf_without_counterfactual_signal(tokenizer) -> None:
    """``cf_prior`` (the fidelity table's prior-only control, CF with no spans) has exactly CF's weights
    when no span moves the answer, whatever the policy: the rows CF and inverted CF are read against."""
    zero: dict[str, torch.Tensor] = {}
    prior = cf_rhos(tokenizer, (0.0, 0.0), zero)
    assert torch.equal(zero["cf_prior"], zero["cf"]) and prior["cf_prior"] == prior["cf"]
    for drops in ((2.0, 2.0), (0.0, 6.7)):
        w: dict[str, torch.Tensor] = {}
        rho = cf_rhos(tokenizer, drops, w)
        assert torch.equal(w["cf_prior"], zero["cf"]) and not torch.equal(w["cf"], zero["cf"])
        assert rho["cf_prior"] == prior["cf"]


# ------------------------------------------------------------------------------ Monte-Carlo importance


def test_importance_from_values_by_hand() -> None:
    imp, se = mci.importance_from_values([0.25, 0.5, 1.0], [0.1, 0.2, 0.0])
    assert imp == [0.25, 0.5] and se == pytest.approx([math.sqrt(0.05), 0.2])
    assert mci.binomial_se(0.5, 4) == 0.25 and mci.binomial_se(1.0, 4) == 0.0


def test_mc_values_with_a_known_policy(tokenizer) -> None:
    """Continuations that stop at once: P(correct | prefix) = 1 iff the prefix already holds the boxed gold,
    so the importance is 1 exactly at the token that completes it and 0 elsewhere (se 0)."""
    right, _ = right_and_slipped(Q)
    resp = tokenizer(right, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    calls = []

    def sampler(model, tok, ids, mask, *, n, temperature, top_p, max_new_tokens, generator_seed):
        calls.append((ids.shape[0], n, max_new_tokens))
        return torch.full((ids.shape[0] * n, 3), tok.eos_token_id)

    def reward(text, gold, *, timeout_s):
        return float("\\boxed{9}" in text)

    imp, se = mci.mc_importance(None, tokenizer, [5, 6], resp, "9", 1.0, k=3, temperature=1.0, top_p=1.0,
                                max_new_tokens=64, seed=0, reward_fn=reward, timeout_s=1.0, prefixes_per_call=8,
                                sampler=sampler)
    pieces = [tokenizer.decode([t]) for t in resp]
    j = next(t for t in range(len(resp)) if "\\boxed{9}" in "".join(pieces[: t + 1]))
    assert imp == [1.0 if t == j else 0.0 for t in range(len(resp))] and set(se) == {0.0}
    assert [c[0] for c in calls] == [8] * (len(resp) // 8) + ([len(resp) % 8] if len(resp) % 8 else [])
    assert all(c[1] == 3 for c in calls) and calls[0][2] == 64


def test_mc_values_on_a_real_model_are_probabilities_and_seeded(tiny_env, tokenizer) -> None:
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_env["model"]).eval()
    resp = tokenizer(" 7 + 5 = 12.", add_special_tokens=False)["input_ids"]
    kw = dict(k=2, temperature=1.0, top_p=1.0, max_new_tokens=12, seed=3, reward_fn=lambda t, g, timeout_s: float(
        len(t) % 2 == 0), timeout_s=1.0)
    v, se = mci.mc_values(model, tokenizer, [5, 6, 7], resp, "9", 0.0, **kw)
    assert len(v) == len(resp) + 1 and v[-1] == 0.0 and all(x in (0.0, 0.5, 1.0) for x in v)
    assert all(s == pytest.approx(mci.binomial_se(x, 2)) for x, s in zip(v, se))
    assert (v, se) == mci.mc_values(model, tokenizer, [5, 6, 7], resp, "9", 0.0, **kw)


# ------------------------------------------------------------------------------ gradient SNR


def test_head_gradients_match_autograd_of_the_trainers_loss() -> None:
    """The closed form sum_t c_t (e - p) h^T equals -dL/dW of per_token_loss + aggregate through a softmax head."""
    from training import losses
    from training.credit import gradsnr

    g = torch.Generator().manual_seed(0)
    B, R, H, V = 6, 5, 4, 7
    h, W = torch.randn(B, R, H, generator=g), torch.randn(V, H, generator=g, requires_grad=True)
    ids = torch.randint(0, V, (B, R), generator=g)
    mask = (torch.rand(B, R, generator=g) > 0.2).float()
    adv, w = torch.randn(B, generator=g), torch.rand(B, R, generator=g) + 0.5
    groups = torch.arange(B) // 2
    preset = get_preset("grpo")
    logp = torch.log_softmax(h @ W.T, -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    per_token, _, _ = losses.per_token_loss(logp, logp.detach(), adv, w, eps_low=0.2, eps_high=0.2, dual_clip_c=None,
                                         kl_beta=0.0, weights_on_kl=False, kl_clamp=None)
    loss = losses.aggregate(per_token, mask, preset.aggregation, num_tokens=float(mask.sum()),
                            num_seqs=float((mask.sum(-1) > 0).sum()))
    (grad,) = torch.autograd.grad(loss, W)
    credit = effective_credit(preset, adv, w, mask, R)
    G = gradsnr.head_group_gradients(h, W, ids, credit, groups)
    assert G.shape == (3, V, H)
    torch.testing.assert_close(G.sum(0), -grad, atol=1e-5, rtol=1e-4)
    out = gradsnr.step_gradient_snr(preset, h, W, ids, adv, w, mask, groups, R)
    assert out["grad_norm_head"] == pytest.approx(float(grad.norm()), rel=1e-4) and out["grad_snr_head"] > 0


def test_snr_pure_noise_near_one_and_pure_signal_large() -> None:
    from training.credit.gradsnr import snr_of

    g = torch.Generator().manual_seed(1)
    noise = [snr_of(torch.randn(16, 8, 8, generator=g))["grad_snr_head"] for _ in range(200)]
    assert 0.8 < float(np.mean(noise)) < 1.2  # E||mean||^2 = tr Σ / n: about 1 without signal
    signal = snr_of(torch.ones(16, 8, 8) + 0.01 * torch.randn(16, 8, 8, generator=g))["grad_snr_head"]
    assert signal > 1000
    assert snr_of(torch.zeros(4, 2, 2))["grad_snr_head"] is None and snr_of(torch.ones(1, 2))["grad_snr_head"] is None


def test_rl_loop_logs_gradient_snr(tiny_env, tmp_path) -> None:
    from training.rl import train

    cfg = tiny_env["cfg"]
    train(cfg, get_preset("dapo"), seed=5, sft_dir=str(tiny_env["model"]), train_path=str(tiny_env["train"]),
          run_dir=str(tmp_path), reward_fn=lambda t, g, timeout_s: float(sum(c.isdigit() for c in t) % 2 == 0))
    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert len(rows) == cfg.rl.steps and all("grad_snr_head" in r and r["grad_norm_head"] >= 0 for r in rows)


# ------------------------------------------------------------------------------ the whole run


def known_sampler(problems: list[dict]):
    """A ``sample_hf`` stand-in: per group, rows alternate the right worked solution and a slipped one."""
    by_prompt = {p["prompt"]: p for p in problems}

    def sampler(model, tokenizer, prompt_ids, prompt_mask, *, n, temperature, top_p, max_new_tokens, generator_seed):
        rows = []
        for prompt in tokenizer.batch_decode(prompt_ids, skip_special_tokens=True):
            pair = right_and_slipped(by_prompt[prompt]["question"])
            rows += [tokenizer(pair[k % 2], add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
                     for k in range(n)]
        width = max(map(len, rows))
        return torch.tensor([r + [tokenizer.pad_token_id] * (width - len(r)) for r in rows])

    return sampler


def test_run_writes_tables_figure_and_records(tiny_env, tmp_path) -> None:
    from training.studies import fidelity_run

    raw = dict(tiny_env["cfg"].raw, rl={**tiny_env["cfg"].raw["rl"], "max_new_tokens": 96},
               fidelity={"bootstrap": 50, "mc": {"enabled": True, "k": 2, "responses": 1}})
    cfg = config_from_dict(raw)
    model = str(tiny_env["model"])
    rows = [(f"{p}@sft", p, model, s) for p in ("dapo", "delta_random", "cf") for s in (1, 2)]
    metrics = tmp_path / "m.jsonl"
    metrics.write_text('{"step": 0, "grad_snr_head": 2.0, "grad_norm_head": 0.5}\n'
                       '{"step": 1, "grad_snr_head": null, "grad_norm_head": 0.0}\n')
    table = fidelity_run.run(cfg, rows, train_path=tiny_env["train"], out_dir=tmp_path / "out",
                             metrics=[("dapo", str(metrics))], sampler=known_sampler(read_jsonl(tiny_env["train"])))
    n = 2 * cfg.rl.prompts_per_step * cfg.rl.group_size  # two seeds; every group has 2 right, 2 slipped
    by = {r["label"]: r for r in table}
    assert list(by) == ["dapo@sft", "delta_random@sft", "cf@sft"]
    assert all(r["n_responses"] == n == r["n_rho"] and r["seeds"] == "1 2" for r in table)
    assert by["dapo@sft"]["rho"] == 0.0  # uniform credit: no order; decisive share = token share
    # (equal only within a seed: token_mean's normaliser is each batch's own token count)
    assert by["dapo@sft"]["decisive_share"] == pytest.approx(by["dapo@sft"]["decisive_token_share"], rel=0.01)
    assert by["cf@sft"]["n_mc"] == 2 and "rho_mc" in by["delta_random@sft"]
    out = tmp_path / "out"
    md = (out / "credit_fidelity.md").read_text()
    assert md.count("\n| ") == 1 + 3 and "ρ vs MC" in md
    assert (out / "credit_fidelity.csv").read_text().splitlines()[0].startswith("label,preset,checkpoint,rho,")
    assert (out / "credit_fidelity.png").stat().st_size > 1000 and (out / "credit_fidelity.pdf").is_file()
    recs = read_jsonl(out / "records.jsonl")
    assert sum(r["truth"] == "exact" for r in recs) == 3 * n and sum(r["truth"] == "mc" for r in recs) == 2
    snr = (out / "gradient_snr.md").read_text()
    assert "| dapo | 1 | 1 | 2 ± – | 2 | 0.5 |" in snr


def test_token_level_advantages_reach_the_credit(tiny_env, tmp_path) -> None:
    """OTB, KTAE and TEMPO replace A_i by A_{i,t}: their credit varies within a response (rho defined and non-zero),
    where a sequence-level preset's is constant (rho 0), as in the loss the RL loop minimises."""
    from training.studies import fidelity_run

    cfg = config_from_dict(dict(tiny_env["cfg"].raw, rl={**tiny_env["cfg"].raw["rl"], "max_new_tokens": 96},
                                fidelity={"bootstrap": 20}))
    model = str(tiny_env["model"])
    rows = [(f"{p}@sft", p, model, 1) for p in ("dapo", "otb", "ktae", "tempo")]
    table = fidelity_run.run(cfg, rows, train_path=tiny_env["train"], out_dir=tmp_path / "out", metrics=[],
                             sampler=known_sampler(read_jsonl(tiny_env["train"])))
    rho = {r["label"]: r["rho"] for r in table}
    assert rho["dapo@sft"] == 0.0
    assert rho["otb@sft"] != 0.0 and rho["ktae@sft"] != 0.0, rho
    assert rho["tempo@sft"] != 0.0, rho  # right and slipped responses branch at the slip: TEMPO's TD lands there
