"""The one registration surface for methods (verl's ``register_policy_loss`` / ``register_adv_est`` pattern).

A method registers each of its functions once, where it is defined, with what it reads declared beside it::

    @register("token_weights", reads={"entropy"}, cite="80/20, arXiv 2506.01939")
    def forking_tokens(batch, *, top_quantile): ...

and a preset (``training.presets``) is a row naming registered functions and their knobs. From the
declarations the loop knows which forwards and statistics phase 3 computes (``Preset.needs``), the TRL
backend whether it must run pi_old's forward (``trl_backend.needs_old_forward``), and the plan whether a
backend can run a preset at all (``presets.refusal``, checked at DAG time). Bench and test lists and the
method tables (``python -m training.presets``) are derived from here, not kept by hand.

Kinds (signature; the stage of the loss):

- ``outcome_advantage``: ``fn(rewards [B], group_ids [B], *, scale_by_std, **outcome_knobs) -> A [B]``;
- ``token_weights``: ``fn(batch: CreditBatch, **knobs) -> w [B, R]`` (no grad, theta_old, fixed for the update);
- ``token_advantage``: ``fn(batch, **advantage_knobs) -> A [B, R]``, replacing A_i in the loss;
- ``token_terms``: ``fn(batch, **terms_knobs) -> {"eps_low" | "eps_high" | "kl_beta": [B, R]}``, per-token
  clip bounds / KL coefficient;
- ``policy_loss``: ``fn(logp, old_logp, advantages [B, R], *, eps_low, eps_high, dual_clip_c, ratio_level,
  mask) -> (loss [B, R], clipped [B, R] bool)``: the surrogate and its clip statistic, one place for both backends.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Callable, Collection, Mapping

KINDS: tuple[str, ...] = ("outcome_advantage", "token_weights", "token_advantage", "token_terms", "policy_loss")
READS: frozenset[str] = frozenset({"old_logp", "entropy", "hidden", "kv", "sum_pi_sq", "values"})
"""What a function may read beyond the batch's tokens, rewards and advantages: phase 3's outputs
(``CreditBatch.old_logp``, ``entropy``, ``hidden``), CF's kept keys/values (``kv``, native-loop speed-up), a
per-position statistic of ``credit.batch.POSITION_STATS`` (``sum_pi_sq``) or a learned critic's ``values``."""
BACKENDS: tuple[str, ...] = ("native", "trl")


@dataclass(frozen=True)
class Method:
    """One registered function and its declarations."""

    kind: str
    name: str
    fn: Callable
    reads: frozenset[str]
    backends: frozenset[str]
    cite: str


_REGISTRY: dict[str, dict[str, Method]] = {k: {} for k in KINDS}


def register(kind: str, name: str | None = None, *, reads: Collection[str] = (), backends: Collection[str] = BACKENDS,
             cite: str = "") -> Callable[[Callable], Callable]:
    """Decorator: register ``fn`` as ``name`` (default: its own name) of ``kind``; returns ``fn`` unchanged."""
    if kind not in KINDS:
        raise KeyError(f"unknown method kind {kind!r}; valid: {list(KINDS)}")
    if unknown := sorted(set(reads) - READS):
        raise KeyError(f"{name}: reads {unknown} unknown; valid: {sorted(READS)}")
    if unknown := sorted(set(backends) - set(BACKENDS)):
        raise KeyError(f"{name}: backends {unknown} unknown; valid: {list(BACKENDS)}")

    def decorate(fn: Callable) -> Callable:
        key = name or fn.__name__
        if key in _REGISTRY[kind] and _REGISTRY[kind][key].fn is not fn:
            raise KeyError(f"{kind} {key!r} registered twice ({_REGISTRY[kind][key].fn.__module__}, {fn.__module__})")
        _REGISTRY[kind][key] = Method(kind, key, fn, frozenset(reads), frozenset(backends), cite)
        return fn

    return decorate


def methods(kind: str) -> Mapping[str, Method]:
    """The registered methods of ``kind``, by name (complete once ``training.credit`` is imported: it imports
    every module of its package, and ``training.losses``)."""
    return MappingProxyType(_REGISTRY[kind])


def functions(kind: str) -> Mapping[str, Callable]:
    """The registered functions of ``kind``, by name (``TOKEN_WEIGHTS`` and friends are these views)."""
    return MappingProxyType({n: m.fn for n, m in methods(kind).items()})


def get(kind: str, name: str) -> Method:
    """A registered method; the error lists the valid names."""
    try:
        return methods(kind)[name]
    except KeyError:
        raise KeyError(f"unknown {kind} function {name!r}; valid: {sorted(methods(kind))}") from None


def table() -> str:
    """The method table (markdown), from the declarations."""
    rows = ["| kind | name | function | reads | backends | paper / code |", "|---|---|---|---|---|---|"]
    for kind in KINDS:
        for m in methods(kind).values():
            rows.append(f"| {kind} | {m.name} | ``{m.fn.__module__}.{m.fn.__name__}`` | "
                        f"{', '.join(sorted(m.reads)) or '-'} | {', '.join(sorted(m.backends))} | {m.cite} |")
    return "\n".join(rows)
