"""Build the embedded tiny model: a byte-level BPE tokenizer trained locally with ``tokenizers`` and a
randomly initialised Qwen3 (or Llama) causal LM from a ``transformers`` config, saved with
``save_pretrained`` (safetensors) so that ``AutoModelForCausalLM`` / ``AutoTokenizer``, vLLM and
lm-eval load the folder like any hub model.

Digits are split one per token (as Qwen and Llama do), so arithmetic is learnable at this size.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer, PreTrainedTokenizerFast

from common.config import ModelConfig, load_config
from common.io import read_jsonl
from common.runtime import setup_runtime
from training.checkpoint import save_hf_atomic

EOS = "<|endoftext|>"
SPECIAL_TOKENS = [EOS, "<|im_start|>", "<|im_end|>"]


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE over ``texts``; eos = pad = ``<|endoftext|>``; left padding for generation."""
    tok = Tokenizer(models.BPE())
    # Byte-level split first (" 20" stays one chunk "Ġ20"), then one digit per token, the leading
    # space kept with the first digit ("Ġ2", "0"): digit-level arithmetic without a token per space.
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.ByteLevel(add_prefix_space=False),
         pre_tokenizers.Split(Regex("\u0120?[0-9]"), behavior="isolated")]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    # padding_side must be given to the constructor: setting it afterwards is not saved (transformers 5).
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, eos_token=EOS, pad_token=EOS, bos_token=None, padding_side="left"
    )


def build_model(cfg: ModelConfig, tokenizer: PreTrainedTokenizerFast) -> torch.nn.Module:
    arch = {"qwen3": "qwen3", "llama": "llama"}[cfg.arch]
    kwargs = dict(
        vocab_size=len(tokenizer),
        hidden_size=cfg.hidden_size,
        num_hidden_layers=cfg.num_layers,
        num_attention_heads=cfg.num_heads,
        num_key_value_heads=cfg.num_kv_heads,
        intermediate_size=cfg.intermediate_size,
        max_position_embeddings=cfg.max_position,
        tie_word_embeddings=True,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.eos_token_id,
        torch_dtype="float32",
    )
    if arch == "qwen3":
        kwargs["head_dim"] = cfg.hidden_size // cfg.num_heads
    config = AutoConfig.for_model(arch, **kwargs)
    torch.manual_seed(cfg.seed)
    return AutoModelForCausalLM.from_config(config)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="build the tiny model + tokenizer (HF format)")
    parser.add_argument("--config", required=True)
    parser.add_argument("--train", required=True, help="train JSONL whose text trains the tokenizer")
    parser.add_argument("--out", required=True)
    args = parser.parse_args(argv)
    cfg = load_config(args.config)
    setup_runtime(cfg.runtime)
    out = Path(args.out)
    if cfg.model.source:  # a real model: copy it through save_pretrained so the DAG is the same
        tokenizer = AutoTokenizer.from_pretrained(cfg.model.source, padding_side="left")
        model = AutoModelForCausalLM.from_pretrained(cfg.model.source)
    else:
        rows = read_jsonl(args.train)
        tokenizer = train_tokenizer([r["prompt"] + r["solution"] for r in rows], cfg.model.vocab_size)
        model = build_model(cfg.model, tokenizer)
    save_hf_atomic(model, tokenizer, out)  # atomic, with the umask's file modes
    n_params = sum(p.numel() for p in model.parameters())
    print(f"saved {model.config.model_type} with {n_params:,} parameters, vocab {len(tokenizer)} to {out}")


if __name__ == "__main__":
    main()
