#!/usr/bin/env python3
"""Builds random Qwen3 checkpoints with torch + transformers and writes what the CUDA runner is
checked against (cuda_reference_test.cpp). Runs on the GPU machine (scripts/gpu-check).

  make_reference.py OUT_DIR

For each shape (the 0.6B shape, and 2 layers of the 4B width) it writes OUT_DIR/<name>/:
  checkpoint/         config.json + model.safetensors in bf16, saved by save_pretrained
  logits_fp32.bin     float32 [positions][vocab]: the logits of every prompt position, computed
                      by the reloaded checkpoint upcast to fp32 (the exact function of the bf16
                      weights; a model cast to bf16 in memory would also round its RoPE table)
  reference.json      prompts, per-position top-1 and top-1/top-2 margin, the same logits from the
                      checkpoint run in bf16 (max |bf16 - fp32|: the bound's yardstick) and
                      64-token greedy generations (fp32 and bf16) with the margin of every step
and OUT_DIR/index.json listing the names.
"""
import json
import math
import os
import sys
import time

import torch
from transformers import Qwen3Config, Qwen3ForCausalLM

ROPE_THETA = 1e6
COMMON = dict(vocab_size=151936, head_dim=128, max_position_embeddings=40960,
              rms_norm_eps=1e-6, tie_word_embeddings=True, hidden_act="silu",
              attention_bias=False, use_sliding_window=False, bos_token_id=151643,
              eos_token_id=151645, initializer_range=0.02)
SHAPES = {
    "qwen3-0.6b-random": dict(num_hidden_layers=28, hidden_size=1024, num_attention_heads=16,
                              num_key_value_heads=8, intermediate_size=3072),
    "qwen3-4b-width-2layer-random": dict(num_hidden_layers=2, hidden_size=2560,
                                         num_attention_heads=32, num_key_value_heads=8,
                                         intermediate_size=9728),
}
PROMPT_LENGTHS = [5, 37, 120]
GENERATED_TOKENS = 64
GENERATION_PROMPTS = [0, 1]  # indices into the prompts
SEED = 20261129


def log(*args):
    print("make_reference:", *args, flush=True)


def make_config(shape):
    config = Qwen3Config(rope_theta=ROPE_THETA, **COMMON, **shape)
    # transformers 5 keeps RoPE settings in rope_parameters; older ones in rope_theta.
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict):
        params["rope_theta"] = ROPE_THETA
    config.rope_theta = ROPE_THETA
    return config


def load(directory, dtype):
    kwargs = dict(attn_implementation="eager")
    try:
        model = Qwen3ForCausalLM.from_pretrained(directory, dtype=dtype, **kwargs)
    except TypeError:
        model = Qwen3ForCausalLM.from_pretrained(directory, torch_dtype=dtype, **kwargs)
    model = model.to("cuda").eval()
    inv_freqs = [b for name, b in model.named_buffers() if name.endswith("inv_freq")]
    if not inv_freqs:
        sys.exit(f"make_reference: {directory}: no RoPE inv_freq buffer to check rope_theta with")
    got = float(inv_freqs[0].float()[1])
    expected = 1.0 / (ROPE_THETA ** (2.0 / 128))
    if abs(got - expected) > 1e-5 * expected:
        sys.exit(f"make_reference: {directory} loaded with RoPE inv_freq[1] {got}, expected "
                 f"{expected} (rope_theta {ROPE_THETA})")
    return model


def check_saved_config(directory):
    with open(os.path.join(directory, "config.json")) as f:
        saved = json.load(f)
    theta = saved.get("rope_theta")
    if theta is None and isinstance(saved.get("rope_parameters"), dict):
        theta = saved["rope_parameters"].get("rope_theta")
    if theta != ROPE_THETA or saved.get("tie_word_embeddings") is not True:
        sys.exit(f"make_reference: saved config has rope_theta {theta} and tie_word_embeddings "
                 f"{saved.get('tie_word_embeddings')}; expected {ROPE_THETA} and true")


@torch.no_grad()
def all_logits(model, prompt):
    ids = torch.tensor([prompt], device="cuda")
    return model(ids).logits[0].float()


@torch.no_grad()
def greedy(model, prompt, steps):
    """Greedy continuation without a KV cache (each step recomputes: simple and exact)."""
    tokens, margins = list(prompt), []
    for _ in range(steps):
        row = model(torch.tensor([tokens], device="cuda")).logits[0, -1].float()
        top2 = torch.topk(row, 2)
        margins.append(float(top2.values[0] - top2.values[1]))
        tokens.append(int(top2.indices[0]))
    return tokens[len(prompt):], margins


def build(name, shape, out_dir):
    started = time.time()
    directory = os.path.join(out_dir, name)
    checkpoint = os.path.join(directory, "checkpoint")
    os.makedirs(checkpoint, exist_ok=True)
    torch.manual_seed(SEED)
    model = Qwen3ForCausalLM(make_config(shape))
    with torch.no_grad():  # norm weights 1 + N(0, 0.1^2): a wrong norm must show
        for pname, p in model.named_parameters():
            if pname.endswith("norm.weight"):
                p.copy_(1 + 0.1 * torch.randn_like(p))
    model = model.to(torch.bfloat16)
    try:
        model.save_pretrained(checkpoint, safe_serialization=True)
    except TypeError:
        model.save_pretrained(checkpoint)
    del model
    check_saved_config(checkpoint)

    generator = torch.Generator().manual_seed(SEED + 1)
    prompts = [torch.randint(0, 151643, (n,), generator=generator).tolist() for n in PROMPT_LENGTHS]
    fp32 = load(checkpoint, torch.float32)
    bf16 = load(checkpoint, torch.bfloat16)
    reference = dict(name=name, shape=shape, prompts=prompts, top1=[], margin=[],
                     hf_bf16_max_abs_diff_per_prompt=[], logits_rms=[], generations=[])
    with open(os.path.join(directory, "logits_fp32.bin"), "wb") as logits_file:
        for prompt in prompts:
            exact = all_logits(fp32, prompt)
            approx = all_logits(bf16, prompt)
            logits_file.write(exact.cpu().numpy().astype("<f4").tobytes())
            top2 = torch.topk(exact, 2, dim=-1)
            reference["top1"].append(top2.indices[:, 0].tolist())
            reference["margin"].append((top2.values[:, 0] - top2.values[:, 1]).tolist())
            reference["hf_bf16_max_abs_diff_per_prompt"].append(
                float((approx - exact).abs().max()))
            reference["logits_rms"].append(float(exact.pow(2).mean().sqrt()))
    reference["hf_bf16_max_abs_diff"] = max(reference["hf_bf16_max_abs_diff_per_prompt"])
    for index in GENERATION_PROMPTS:
        tokens, margins = greedy(fp32, prompts[index], GENERATED_TOKENS)
        tokens_bf16, _ = greedy(bf16, prompts[index], GENERATED_TOKENS)
        reference["generations"].append(dict(prompt_index=index, tokens=tokens, margins=margins,
                                             tokens_hf_bf16=tokens_bf16))
    with open(os.path.join(directory, "reference.json"), "w") as f:
        json.dump(reference, f)
    same = [g["tokens"] == g["tokens_hf_bf16"] for g in reference["generations"]]
    log(f"{name}: {sum(PROMPT_LENGTHS)} positions, HF bf16 vs fp32 max |diff| "
        f"{reference['hf_bf16_max_abs_diff']:.4f} (logits rms {max(reference['logits_rms']):.3f}), "
        f"HF bf16 greedy == fp32 greedy: {same}, {time.time() - started:.0f} s")
    del fp32, bf16
    torch.cuda.empty_cache()


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    if not torch.cuda.is_available():
        sys.exit("make_reference: torch sees no CUDA device")
    import transformers
    log(f"torch {torch.__version__}, transformers {transformers.__version__}, "
        f"{torch.cuda.get_device_name()}")
    for name, shape in SHAPES.items():
        build(name, shape, out_dir)
    with open(os.path.join(out_dir, "index.json"), "w") as f:
        json.dump(dict(checkpoints=list(SHAPES), generated_tokens=GENERATED_TOKENS), f)


if __name__ == "__main__":
    main()
