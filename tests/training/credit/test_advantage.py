"""Token-level advantages (OTB, KTAE) against float64 ports of their authors' code on fixtures."""

from __future__ import annotations

import math
from collections import defaultdict

import pytest
import torch

from training.credit import TOKEN_ADVANTAGES, CreditBatch
from training.credit.advantage import fisher_two_sided, ktae_key_token_scores, otb_advantages_from
from training.losses import group_advantages
from training.presets import PRESETS

torch.set_num_threads(1)


# ------------------------------------------------------------------------------------------- OTB


def port_verl_otb(token_rewards, mask, index, old_logp, sum_pi_sq, handle_zero_tail=True, eps=1e-8):
    """verl ``compute_optimal_token_baseline_advantage`` (no rollout IS weights), re-written for the test."""
    B, R = token_rewards.shape
    returns = (token_rewards * mask).flip(-1).cumsum(-1).flip(-1)
    w_cum = ((1 - 2 * old_logp.exp() + sum_pi_sq) * mask).cumsum(-1)
    groups = defaultdict(list)
    for i in range(B):
        groups[int(index[i])].append(i)
    base = torch.zeros_like(returns)
    for rows in groups.values():
        if len(rows) == 1:
            continue
        idx = torch.tensor(rows)
        num = (returns[idx] * w_cum[idx] * mask[idx]).sum(0)
        den = (w_cum[idx] * mask[idx]).sum(0) + eps
        base[idx] = (num / den).unsqueeze(0).expand(len(rows), -1)
        if handle_zero_tail:
            lengths = mask[idx].sum(-1)
            srt = torch.sort(lengths).values
            mx, second = int(srt[-1]), int(srt[-2])
            longest = (lengths == mx).nonzero(as_tuple=True)[0]
            if longest.numel() == 1 and mx > second:
                base[rows[int(longest[0])], second:] = 0.0
    return (returns - base) * mask


def otb_fixture(seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([7, 3, 5, 2, 6, 6, 4, 1, 5])  # group 0: unique longest; group 1: tied; group 2: one
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 2, 3])  # group 3 is a singleton too
    B, R, V = len(lengths), 8, 11
    mask = (torch.arange(R)[None] < lengths[:, None]).double()
    logits = torch.randn(B, R, V, generator=g, dtype=torch.float64)
    ids = torch.randint(0, V, (B, R), generator=g)
    logp_all = torch.log_softmax(logits, -1)
    old_logp = logp_all.gather(-1, ids[..., None]).squeeze(-1)
    sum_pi_sq = logp_all.exp().pow(2).sum(-1)
    rewards = torch.tensor([1.0, 0.0, 1.0, -0.25, 0.0, 1.0, 1.0, 1.0, 0.0], dtype=torch.float64)
    return rewards, groups, mask, old_logp, sum_pi_sq


@pytest.mark.parametrize("handle_zero_tail", [True, False])
def test_otb_matches_verl_port(handle_zero_tail):
    rewards, groups, mask, old_logp, sum_pi_sq = otb_fixture()
    token_rewards = torch.zeros_like(mask)
    token_rewards[torch.arange(len(rewards)), mask.sum(-1).long() - 1] = rewards  # outcome on the last token
    want = port_verl_otb(token_rewards, mask, groups, old_logp, sum_pi_sq, handle_zero_tail=handle_zero_tail)
    got = otb_advantages_from(rewards, groups, mask, old_logp, sum_pi_sq, handle_zero_tail=handle_zero_tail,
                              eps=1e-8)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert (got[7] == rewards[7] * mask[7]).all()  # singleton group: no baseline


def test_otb_equal_path_weights_give_the_group_mean_baseline():
    """With W_t equal across a group (all rows valid at t), B_t is the group's mean reward (Dr.GRPO's A)."""
    B, R = 4, 3
    mask = torch.ones(B, R, dtype=torch.float64)
    old_logp = torch.full((B, R), math.log(0.5), dtype=torch.float64)
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0], dtype=torch.float64)
    got = otb_advantages_from(rewards, torch.zeros(B, dtype=torch.long), mask, old_logp,
                              torch.full((B, R), 0.3, dtype=torch.float64), handle_zero_tail=True, eps=0.0)
    torch.testing.assert_close(got, (rewards - rewards.mean())[:, None].expand(B, R))


def test_otb_preset_function_reads_the_batch():
    rewards, groups, mask, old_logp, sum_pi_sq = otb_fixture(1)
    B, R = mask.shape
    batch = CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                        response_ids=torch.ones(B, R, dtype=torch.long), response_mask=mask, old_logp=old_logp,
                        entropy=torch.zeros(B, R), advantages=torch.zeros(B), group_ids=groups, hidden=None,
                        pad_token_id=0, tokenizer=None, logp_fn=None, generator=torch.Generator(),
                        rewards=rewards, stats={"sum_pi_sq": sum_pi_sq})
    got = TOKEN_ADVANTAGES["otb"](batch, **PRESETS["otb"].advantage_knobs)
    torch.testing.assert_close(got, otb_advantages_from(rewards, groups, mask, old_logp, sum_pi_sq,
                                                        handle_zero_tail=True, eps=1e-8))
    with pytest.raises(ValueError, match="sum_pi_sq"):
        TOKEN_ADVANTAGES["otb"](CreditBatch(**{**batch.__dict__, "stats": {}}), handle_zero_tail=True, eps=1e-8)


# ------------------------------------------------------------------------------------------ KTAE


def _lc(n, k):
    t = torch.tensor([n + 1.0, k + 1.0, n - k + 1.0], dtype=torch.float64).lgamma()
    return float(t[0] - t[1] - t[2])


def port_fisher(a, b, c, d):
    """KTAE ``fisher_exact_test`` for one table (a loop over the first cell's support)."""
    r1, r2, c1 = a + b, c + d, a + c
    n = r1 + r2
    p_obs = math.exp(_lc(c1, a) + _lc(n - c1, r1 - a) - _lc(n, r1))
    total = 0.0
    for k in range(int(max(0, r1 + c1 - n)), int(min(r1, c1)) + 1):
        p_k = math.exp(_lc(c1, k) + _lc(n - c1, r1 - k) - _lc(n, r1))
        if p_k <= p_obs:
            total += p_k
    return total


def port_ktae_key_tokens(responses, mask, rewards, max_token_num, ignore_id):
    """KTAE ``ComputeKeyTokens(alpha=1, beta_ig=1, gamma_tf=1, top=1).get_key_tokens()``, per token in Python."""
    out = torch.zeros(max_token_num + 1, dtype=torch.float64)
    pos, neg = rewards > 0, rewards <= 0
    if not pos.any() or not neg.any():
        return out
    cor, wro, cm, wm = responses[pos], responses[neg], mask[pos], mask[neg]

    def rows_containing(t, m):
        return {v: sum(1 for r in range(t.shape[0]) if any(int(t[r, j]) == v and m[r, j] == 1
                                                             for j in range(t.shape[1])))
                for v in set(t[m == 1].tolist())}

    dc, dw = rows_containing(cor, cm), rows_containing(wro, wm)
    nc, nw = cor.shape[0], wro.shape[0]
    toks_c, toks_w = cor[cm == 1].tolist(), wro[wm == 1].tolist()
    tc, tw = len(toks_c), len(toks_w)
    avg = (tc + tw) / 2
    kc, kw = 2.0 * (1 - 0.5 + 0.5 * tc / avg), 2.0 * (1 - 0.5 + 0.5 * tw / avg)

    def h(p):
        return -p * math.log2(p) if p > 0 else 0.0

    for v in set(responses.flatten().tolist()):
        a, b = dc.get(v, 0), dw.get(v, 0)
        if a + b == 0:
            continue
        c, d = nc - a, nw - b
        n = a + b + c + d
        hy = h((a + c) / n) + h((b + d) / n)
        hyx = sum(((x1 + x2) / n) * ((h(x1 / (x1 + x2)) + h(x2 / (x1 + x2))) if x1 + x2 > 0 else 0.0)
                  for x1, x2 in ((a, b), (c, d)))
        ig = hy - hyx
        p = port_fisher(a, b, c, d)
        fmt = math.exp(-2 * p) if p != 1.0 else 0.0
        fc, fw = toks_c.count(v) / tc, toks_w.count(v) / tw
        tfc, tfw = fc * 3.0 / (fc + kc), fw * 3.0 / (fw + kw)
        cohen = (math.asin(math.sqrt(min(max(a / (a + c + 1e-10), 0), 1)))
                 - math.asin(math.sqrt(min(max(b / (b + d + 1e-10), 0), 1))))
        x = cohen + tfc / (tfw + 1e-5) - tfw / (tfc + 1e-5)
        kt = (fmt + ig) * x / 2.0
        out[v] = (torch.sigmoid(torch.tensor(kt, dtype=torch.float64)) - 0.5) * 2
    out[ignore_id] = 0.0
    return out


def ktae_fixture():
    g = torch.Generator().manual_seed(5)
    B, R, V = 8, 9, 12
    ids = torch.randint(1, V, (B, R), generator=g)
    ids[0, :3] = torch.tensor([7, 7, 7])  # token 7 mostly in correct responses
    ids[1, :2] = torch.tensor([7, 9])
    ids[4, :2] = torch.tensor([9, 9])
    lengths = torch.tensor([9, 6, 4, 7, 5, 9, 3, 8])
    mask = (torch.arange(R)[None] < lengths[:, None]).double()
    ids = torch.where(mask > 0, ids, torch.zeros_like(ids))  # pad id 0 after the end
    rewards = torch.tensor([1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0, 1.0], dtype=torch.float64)
    groups = torch.tensor([0, 0, 0, 0, 0, 1, 1, 1])  # group 0: 3 correct / 2 wrong; group 1: 2 / 1
    return ids, mask, rewards, groups


def test_fisher_two_sided_matches_the_hypergeometric_loop():
    tables = torch.tensor([[3, 0, 0, 2], [2, 1, 1, 1], [0, 0, 3, 2], [1, 2, 2, 0], [4, 1, 0, 5]], dtype=torch.float64)
    got = fisher_two_sided(tables)
    want = torch.tensor([port_fisher(*map(int, t.tolist())) for t in tables], dtype=torch.float64)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    assert got[2].item() == pytest.approx(1.0)  # token absent from every response: p = 1


def test_ktae_key_token_scores_match_the_authors_code():
    ids, mask, rewards, groups = ktae_fixture()
    for g in (0, 1):
        rows = groups == g
        want = port_ktae_key_tokens(ids[rows], mask[rows], rewards[rows], int(ids.max()), ignore_id=0)
        got = ktae_key_token_scores(ids[rows], mask[rows], rewards[rows] > 0, int(ids.max()) + 1, alpha=1.0,
                                    beta_ig=1.0, gamma_tf=1.0, top=1.0, ignore_id=0)
        torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
        assert got.abs().max() > 0.05
    # token 7 (only in correct responses of group 0) scores above token 9 (mostly in wrong ones)
    kt0 = ktae_key_token_scores(ids[groups == 0], mask[groups == 0], rewards[groups == 0] > 0, 12, alpha=1.0,
                                beta_ig=1.0, gamma_tf=1.0, top=1.0, ignore_id=0)
    assert kt0[7] > 0 > kt0[9]
    same = ktae_key_token_scores(ids[:2], mask[:2], torch.tensor([True, True]), 12, alpha=1.0, beta_ig=1.0,
                                 gamma_tf=1.0, top=1.0, ignore_id=0)
    assert (same == 0).all()  # no wrong response: no key tokens


def test_ktae_advantage_is_z_score_plus_key_token_score():
    """Port of ``compute_ktae_outcome_advantage_and_keytokens``: z_i (torch.std, eps 1e-6) + kt[y_t] on the mask."""
    ids, mask, rewards, groups = ktae_fixture()
    B, R = ids.shape
    z = group_advantages(rewards, groups, scale_by_std=True)
    batch = CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                        response_ids=ids, response_mask=mask.float(), old_logp=torch.zeros(B, R),
                        entropy=torch.zeros(B, R), advantages=z, group_ids=groups, hidden=None, pad_token_id=0,
                        tokenizer=None, logp_fn=None, generator=torch.Generator(), rewards=rewards.float())
    got = TOKEN_ADVANTAGES["ktae"](batch, **PRESETS["ktae"].advantage_knobs)
    want = torch.zeros(B, R, dtype=torch.float64)
    for g in (0, 1):
        rows = torch.nonzero(groups == g).flatten()
        sc = rewards[rows]
        zz = (sc - sc.mean()) / (torch.std(sc) + 1e-6)
        kt = port_ktae_key_tokens(ids[rows], mask[rows], sc, int(ids.max()), ignore_id=0)
        want[rows] = (zz[:, None] + kt[ids[rows]]) * mask[rows]
    torch.testing.assert_close(got.double(), want, atol=1e-6, rtol=0)
    assert (got[mask == 0] == 0).all()


# ------------------------------------------------------------------------------------------ TEMPO


def port_tempo(scores, responses, mask, index, norm_by_std=True, eps=1e-6):
    """``fatebreaker/tempo`` ``compute_tempo_outcome_advantage`` re-written for the test: per response, walk its
    tokens; the ancestors are the group's rows that agreed on every earlier token (compared on the padded ids), the
    branch those that also hold this token; A_t = (r_i - mean_g r + mean_branch r - mean_ancestors r) / (std_g r +
    eps) (unbiased std), every later token copying the value once the response is alone in its node."""
    B, R = responses.shape
    out = torch.zeros(B, R, dtype=torch.float64)
    for i in range(B):
        group = [k for k in range(B) if index[k] == index[i]]
        g = scores[group]
        mean, scale = g.mean(), (g.std() + eps) if norm_by_std else 1.0
        ancestors = group
        for j in range(R):
            if mask[i, j] == 0:
                break
            branch = [k for k in ancestors if responses[k, j] == responses[i, j]]
            out[i, j] = (scores[i] - mean + scores[branch].mean() - scores[ancestors].mean()) / scale
            if len(ancestors) == 1:
                out[i, j:] = out[i, j]
                break
            ancestors = branch
    return out * mask


def _tempo_batch(adv, ids, mask, groups):
    B, R = ids.shape
    return CreditBatch(prompt_ids=torch.ones(B, 2, dtype=torch.long), prompt_mask=torch.ones(B, 2),
                       response_ids=ids, response_mask=mask.float(), old_logp=torch.zeros(B, R),
                       entropy=torch.zeros(B, R), advantages=adv, group_ids=groups, hidden=None, pad_token_id=0,
                       tokenizer=None, logp_fn=None, generator=torch.Generator())


T = torch.tensor
TEMPO_CASES = [
    # (case, ids [B, R], valid lengths [B], A_i [B], expected A_{i,t} [B, R]); one group
    # the root is a node: responses that differ at their first token branch there (TD = A_i - mean_g A), and
    # TEMPO is GRPO from the second token on (the authors' code; exactly GRPO only if the outcomes all agree)
    ("no shared prefix: GRPO after the root's branch", [[1, 2, 3], [4, 2, 3], [5, 2, 3]], [3, 3, 3],
     [1.0, -0.5, -0.5], [[2.0, 1.0, 1.0], [-1.0, -0.5, -0.5], [-1.0, -0.5, -0.5]]),
    ("no shared prefix, an uncentred A (mean 0.5): TD = A_i - 0.5", [[1, 2], [4, 2]], [2, 2], [1.0, 0.0],
     [[1.5, 1.0], [-0.5, 0.0]]),
    ("shared until the last token: TD there only", [[3, 3, 1], [3, 3, 2]], [3, 3], [1.0, -1.0],
     [[1.0, 1.0, 2.0], [-1.0, -1.0, -2.0]]),
    # root V 0; "5" {0,1,2} 1/6, "4" {3} -1/2; "5 6" {0,1} 0, "5 9" {2} 1/2; leaves +-1/2 (worked by hand)
    ("two levels of branching", [[5, 6, 7], [5, 6, 8], [5, 9, 7], [4, 6, 7]], [3, 3, 3, 3], [0.5, -0.5, 0.5, -0.5],
     [[2 / 3, 1 / 3, 1.0], [-1 / 3, -2 / 3, -1.0], [2 / 3, 5 / 6, 0.5], [-1.0, -0.5, -0.5]]),
    # row 0 ends after two tokens; its pad id (7) equals row 1's third token: the finished row leaves the node
    ("a finished response leaves deeper nodes", [[5, 6, 7], [5, 6, 7]], [2, 3], [1.0, -1.0],
     [[1.0, 1.0, 0.0], [-1.0, -1.0, -2.0]]),
    ("outcomes all agree: GRPO (zero)", [[2, 2], [2, 3], [4, 2]], [2, 2, 2], [0.0, 0.0, 0.0], [[0.0] * 2] * 3),
]


@pytest.mark.parametrize(("ids", "lengths", "adv", "want"), [c[1:] for c in TEMPO_CASES],
                         ids=[c[0] for c in TEMPO_CASES])
def test_tempo_case_table(ids, lengths, adv, want):
    ids, adv = T(ids), T(adv)
    mask = (torch.arange(ids.shape[1])[None] < T(lengths)[:, None]).float()
    got = TOKEN_ADVANTAGES["tempo"](_tempo_batch(adv, ids, mask, torch.zeros(len(adv), dtype=torch.long)),
                                    **PRESETS["tempo"].advantage_knobs)
    torch.testing.assert_close(got, T(want) * mask)


def tempo_fixture(seed=0, R=7, vocab=3):
    """Three groups of four (a small vocabulary, so prefixes are shared and branch at several depths), one pair
    and two singletons; distinct lengths; pads (id 9) never equal a valid token, as in the authors' batches."""
    g = torch.Generator().manual_seed(seed)
    groups = T([0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 4, 5])
    n = len(groups)
    ids = torch.randint(0, vocab, (n, R), generator=g)
    lengths = torch.randint(2, R + 1, (n,), generator=g)
    mask = (torch.arange(R)[None] < lengths[:, None]).float()
    ids = torch.where(mask > 0, ids, torch.full_like(ids, 9))
    rewards = torch.randint(0, 2, (n,), generator=g).double() - 0.1 * (lengths == R).double()  # + an overlong-like
    rewards[8:12] = T([1.0, 1.0, 1.0, 1.0], dtype=torch.float64)  # group 2: all agree (A = 0, TD = 0)
    return ids, mask, rewards, groups


@pytest.mark.parametrize("scale_by_std", [True, False])
def test_tempo_matches_the_authors_code(scale_by_std):
    """GRPO (z-score) and Dr.GRPO (centred) A_i: our mean-of-A values equal the authors' raw-reward form, group by
    group (groups of two or more; a singleton keeps A_i, where the authors' std of one reward is NaN)."""
    ids, mask, rewards, groups = tempo_fixture()
    adv = group_advantages(rewards, groups, scale_by_std=scale_by_std)
    got = TOKEN_ADVANTAGES["tempo"](_tempo_batch(adv, ids, mask, groups))
    multi = torch.isin(groups, T([0, 1, 2, 3]))
    want = port_tempo(rewards[multi], ids[multi], mask[multi].double(), groups[multi].tolist(),
                      norm_by_std=scale_by_std)
    torch.testing.assert_close(got[multi].double(), want, atol=1e-6, rtol=0)
    torch.testing.assert_close(got[~multi], (adv[:, None] * mask)[~multi])
    assert (got[multi] != (adv[:, None] * mask)[multi]).any()  # the fixture does branch with unequal outcomes
    assert (got[8:12] == 0).all()  # an all-agree group stays at zero


def test_tempo_permuting_responses_permutes_advantages():
    ids, mask, rewards, groups = tempo_fixture(3)
    adv = group_advantages(rewards, groups, scale_by_std=True)
    got = TOKEN_ADVANTAGES["tempo"](_tempo_batch(adv, ids, mask, groups))
    perm = torch.randperm(len(groups), generator=torch.Generator().manual_seed(1))
    relabel = groups[perm] * 10 + 7  # group ids are labels only
    permuted = TOKEN_ADVANTAGES["tempo"](_tempo_batch(adv[perm], ids[perm], mask[perm], relabel))
    torch.testing.assert_close(permuted, got[perm])


def test_tempo_td_steps_telescope_to_the_response_value():
    """Sum_t (A_{i,t} - A_i) = V(leaf_i) - V(root) = A_i - mean_g A when no other row passes through i's last
    node (checked on the rows where that holds; at least two do)."""
    ids, mask, rewards, groups = tempo_fixture(5)
    adv = group_advantages(rewards, groups, scale_by_std=True)
    got = TOKEN_ADVANTAGES["tempo"](_tempo_batch(adv, ids, mask, groups)).double()
    checked = 0
    for i in range(8):
        n = int(mask[i].sum())
        if any(k != i and groups[k] == groups[i] and mask[k].sum() >= n and (ids[k, :n] == ids[i, :n]).all()
               for k in range(len(groups))):
            continue
        checked += 1
        td = ((got[i] - adv[i].double()) * mask[i]).sum()
        torch.testing.assert_close(td, adv[i].double() - adv[groups == groups[i]].double().mean(), atol=1e-5,
                                   rtol=0)
    assert checked >= 2
