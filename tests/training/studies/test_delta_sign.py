"""Sign conventions of credit fidelity through DelTA, on constructed batches whose answer is known (issue 26).

Two right responses (A = +1) and two wrong ones (A = -1), 6 tokens each; token 0 is "scaffolding", token 3
the decisive one (a result in the right responses, the slip in the wrong ones; exact importance +1 / -1).
The LM-head input h and pi_old are constructed, so DelTA's lambda is known by hand:

- *discriminative by construction*: h at token 3 points one way on the right side and the opposite way on
  the wrong side; every other token is shared (same h and p on both sides). DelTA must amplify token 3 on
  both sides, and the credit-fidelity pipeline (effective credit -dL/dlogp, Spearman rho against the exact
  importance, which is negative on a wrong response's slip) must read that as rho > 0 on both sides.
- *the synthetic task's case*: a right result and a slip written after the same prefix share h (h depends
  on the prefix, not on the sampled token); only p differs (right result 0.9, slip 0.3), and scaffolding is
  certain (p ~ 1, v ~ 0). Then lambda is *lowest* on the right side's result and highest on the slip:
  rho < 0 on right responses, > 0 on wrong ones. DelTA's proxy v = (1 - p) h cannot tell the right token
  from the slip; it separates the sides by confidence, and the right side is the more confident one.
"""

from __future__ import annotations

import torch

from training.credit.delta import delta_lambda, delta_reference
from training.credit.gradsnr import effective_credit
from training.presets import get_preset
from training.studies import fidelity as fd

B, R, H, DECISIVE = 4, 6, 3, 3
ADV = torch.tensor([1.0, 1.0, -1.0, -1.0])
IMPORTANCE = [[0.0] * DECISIVE + [1.0] + [0.0] * (R - DECISIVE - 1)] * 2 + \
             [[0.0] * DECISIVE + [-1.0] + [0.0] * (R - DECISIVE - 1)] * 2


def batch(decisive_h: tuple[list[float], list[float]], decisive_p: tuple[float, float],
          shared_p: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(hidden [B,R,H], old_logp [B,R], mask [B,R]): shared tokens identical on both sides; token DECISIVE
    with h / p of the right side for rows 0-1 and of the wrong side for rows 2-3."""
    g = torch.Generator().manual_seed(0)
    shared = torch.randn(R, H, generator=g, dtype=torch.float64)  # one h per position, same for every row
    hidden = shared.expand(B, R, H).clone()
    p = torch.full((B, R), shared_p, dtype=torch.float64)
    for rows, h, q in ((slice(0, 2), decisive_h[0], decisive_p[0]), (slice(2, 4), decisive_h[1], decisive_p[1])):
        hidden[rows, DECISIVE] = torch.tensor(h, dtype=torch.float64)
        p[rows, DECISIVE] = q
    return hidden, p.log(), torch.ones(B, R, dtype=torch.float64)


def lambdas(hidden, old_logp, mask) -> torch.Tensor:
    knobs = get_preset("delta").knobs
    fast = delta_lambda(hidden, old_logp, mask, ADV, **knobs)
    literal = delta_reference(hidden, old_logp, mask, ADV, **{k: v for k, v in knobs.items() if k != "stats"})
    assert torch.allclose(fast, literal, atol=1e-9)  # the reference's formulas give the same lambda
    return fast


def rhos(lam: torch.Tensor, mask: torch.Tensor) -> list[float]:
    credit = effective_credit(get_preset("delta"), ADV, lam * mask, mask, max_len=R)
    return [r.rho for r in fd.batch_fidelity(1, credit, IMPORTANCE, mask, ADV)]


def test_a_discriminative_token_is_amplified_and_read_as_positive_fidelity_on_both_sides() -> None:
    hidden, old_logp, mask = batch(([3.0, 0.0, 0.0], [-3.0, 0.0, 0.0]), (0.5, 0.5), shared_p=0.5)
    lam = lambdas(hidden, old_logp, mask)
    others = [t for t in range(R) if t != DECISIVE]
    assert (lam[:, DECISIVE, None] > lam[:, others]).all(), lam
    assert all(r > 0.5 for r in rhos(lam, mask)), rhos(lam, mask)
    # the same weights read with the advantage's sign dropped would flip the wrong side: the sign is fixed
    wrong_sign = fd.batch_fidelity(1, effective_credit(get_preset("delta"), ADV.abs(), lam, mask, max_len=R),
                                   IMPORTANCE, mask, ADV)
    assert [r.rho < 0 for r in wrong_sign] == [False, False, True, True]


def test_same_prefix_right_result_and_slip_differ_only_in_confidence_rho_negative_on_the_right_side() -> None:
    h = [2.0, 1.0, 0.0]  # the same prefix -> the same h for the right result and the slip
    hidden, old_logp, mask = batch((h, h), (0.9, 0.3), shared_p=0.999)
    lam = lambdas(hidden, old_logp, mask)
    others = [t for t in range(R) if t != DECISIVE]
    assert (lam[:2, DECISIVE, None] < lam[:2, others]).all(), lam  # right side: the result damped
    assert (lam[2:, DECISIVE, None] > lam[2:, others]).all(), lam  # wrong side: the slip amplified
    r = rhos(lam, mask)
    assert r[0] < 0 and r[1] < 0 and r[2] > 0 and r[3] > 0, r
    # mean rho over responses is negative once right responses outnumber wrong ones with a single slip
    assert (3 * r[0] + r[2]) / 4 < 0
