"""Generated tiny checkpoints that look like the real repos the deploy fetches.

`moonshotai/Kimi-K2.6` is a few-MiB lookalike of the real 595 GB checkpoint: the same file
names (``model-00001-of-000004.safetensors``: 5-digit index, 6-digit total), the same tensor
names (MLA attention, int4 pack-quantized routed experts with ``weight_packed`` /
``weight_scale`` / ``weight_shape``, BF16 everything else, MoonViT vision tower and the
``mm_projector`` in the last shard), a real ``model.safetensors.index.json`` and a
``config.json`` with the real architecture and model types. `z-lab/Kimi-K2.6-DFlash` is the
(gated) DFlash draft model. The shards are real safetensors files written by the
`safetensors` library; their bytes are seeded pseudo-random, so the same spec always gives
byte-identical files and the result can be cached.

Sizes scale with one knob per repo: the hidden size is the largest multiple of 64 whose
tensors fit in ``weight_bytes``; the shard count follows from ``shard_bytes`` (shards are
filled in checkpoint order, the vision tower and projector always start a new shard).
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import math
import os
import random
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import safetensors

from .hub import scan_repos

# Bump when the output of generate_repo changes for the same spec: it keys the cache.
GENERATOR_VERSION = "1"

MiB = 1 << 20
KIMI_REPO = "moonshotai/Kimi-K2.6"
DRAFT_REPO = "z-lab/Kimi-K2.6-DFlash"
GATED_REPOS = frozenset({DRAFT_REPO})

_DTYPE_BYTES = {"bfloat16": 2, "float32": 4, "int32": 4}


@dataclass(frozen=True)
class RepoSpec:
    """What to generate for one repo. ``kind`` is ``"kimi-k2.6"`` or ``"dflash"``."""

    repo_id: str
    kind: str
    weight_bytes: int  # target sum of tensor data bytes (the result is at most this, above a floor)
    shard_bytes: int = 8 * MiB  # max tensor bytes per shard (kimi-k2.6 only; dflash is one file)
    seed: int = 0
    gated: bool = False  # informational: the lab Hub should gate this repo


@dataclass(frozen=True)
class _Tensor:
    name: str
    dtype: str  # safetensors constructor name: bfloat16, float32, int32
    shape: tuple[int, ...]
    fill: str = "weight"  # weight | ones | zeros | random | shape

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * _DTYPE_BYTES[self.dtype]


# ---------------------------------------------------------------------------------------
# public API


def default_specs(
    shard_bytes: int = 8 * MiB, kimi_bytes: int = 24 * MiB, draft_bytes: int = 4 * MiB, seed: int = 0
) -> list[RepoSpec]:
    """The lab's two repos: the Kimi K2.6 lookalike and its gated DFlash draft."""
    return [
        RepoSpec(KIMI_REPO, "kimi-k2.6", weight_bytes=kimi_bytes, shard_bytes=shard_bytes, seed=seed),
        RepoSpec(DRAFT_REPO, "dflash", weight_bytes=draft_bytes, shard_bytes=shard_bytes, seed=seed, gated=True),
    ]


def generate_repo(spec: RepoSpec, dest: Path) -> list[str]:
    """Write the repo's files into ``dest`` (created; must not hold other files). Returns the
    repo-relative paths written. Deterministic: the same spec gives byte-identical files."""
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    if spec.kind == "kimi-k2.6":
        files = _kimi_repo(spec)
    elif spec.kind == "dflash":
        files = _dflash_repo(spec)
    else:
        raise ValueError(f"unknown repo kind {spec.kind!r} (expected 'kimi-k2.6' or 'dflash')")
    for rel, content in files.items():
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, list):  # tensors of one safetensors file
            _write_safetensors(path, content, spec)
        else:
            path.write_bytes(content if isinstance(content, bytes) else content.encode())
    return sorted(files)


def specs_key(specs: list[RepoSpec]) -> str:
    blob = json.dumps({"generator": GENERATOR_VERSION, "specs": [asdict(s) for s in specs]}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def ensure_lab_repos(
    cache_dir: Path,
    shard_bytes: int = 8 * MiB,
    *,
    kimi_bytes: int = 24 * MiB,
    draft_bytes: int = 4 * MiB,
    specs: list[RepoSpec] | None = None,
) -> dict[str, Path]:
    """Generate the lab repos once into ``cache_dir/<key>/<org>/<name>`` and return
    ``{repo_id: path}``; ``cache_dir/<key>`` is the Hub root. The key hashes the specs and the
    generator version. Generation goes to a temporary directory renamed into place, so a crash
    never leaves a half repo and concurrent callers agree on one result."""
    specs = specs if specs is not None else default_specs(shard_bytes, kimi_bytes, draft_bytes)
    cache_dir = Path(cache_dir)
    cache_dir.mkdir(parents=True, exist_ok=True)
    key = specs_key(specs)
    final = cache_dir / key
    if not final.is_dir():
        _remove_stale_tmp(cache_dir)
        tmp = cache_dir / f".tmp-{key}-{os.getpid()}-{random.SystemRandom().getrandbits(32):08x}"
        try:
            for spec in specs:
                generate_repo(spec, tmp / spec.repo_id)
            (tmp / "lab-repos.json").write_text(
                json.dumps({"generator": GENERATOR_VERSION, "specs": [asdict(s) for s in specs]}, indent=2) + "\n"
            )
            scan_repos(tmp)  # writes the Hub's hash sidecar now, so the cache is never edited later
            try:
                os.rename(tmp, final)
            except OSError:
                if not final.is_dir():  # not "someone else finished first"
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return {spec.repo_id: final / spec.repo_id for spec in specs}


def _remove_stale_tmp(cache_dir: Path, max_age: float = 3600) -> None:
    for p in cache_dir.glob(".tmp-*"):
        try:
            if time.time() - p.stat().st_mtime > max_age:
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            pass


def shard_name(index: int, total: int) -> str:
    """``model-00001-of-000064.safetensors``: the real Kimi repos' 5-digit index, 6-digit total."""
    return f"model-{index:05d}-of-{total:06d}.safetensors"


# ---------------------------------------------------------------------------------------
# tensors


def _fit_hidden(tensors_for, weight_bytes: int) -> int:
    """Largest hidden size (multiple of 64) whose tensors fit in weight_bytes; at least 64."""
    best = 64
    for hidden in range(64, 64 * 256 + 1, 64):
        if sum(t.nbytes for t in tensors_for(hidden)) > weight_bytes:
            break
        best = hidden
    return best


def _kimi_dims(hidden: int) -> dict:
    return {
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,  # dense layer 0
        "moe_intermediate_size": hidden // 2,  # multiple of 32: int4 groups of 32
        "num_hidden_layers": 6,  # layer 0 dense, 1..5 MoE (the real model: 61)
        "num_attention_heads": 4,
        "n_routed_experts": 8,
        "num_experts_per_tok": 2,
        "n_shared_experts": 1,
        "q_lora_rank": hidden // 4,
        "kv_lora_rank": hidden // 8,
        "qk_nope_head_dim": 32,
        "qk_rope_head_dim": 16,
        "v_head_dim": 32,
        "vocab_size": max(1024, 4 * hidden),
        "vision_hidden": max(32, hidden // 4),
        "vision_layers": 2,
        "pos_emb": 16,
    }


def _kimi_text_tensors(d: dict) -> list[_Tensor]:
    H, heads = d["hidden_size"], d["num_attention_heads"]
    qk = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    out: list[_Tensor] = []
    bf16 = "bfloat16"
    for i in range(d["num_hidden_layers"]):
        p = f"language_model.model.layers.{i}."
        out += [
            _Tensor(p + "input_layernorm.weight", bf16, (H,), "ones"),
            _Tensor(p + "self_attn.q_a_proj.weight", bf16, (d["q_lora_rank"], H)),
            _Tensor(p + "self_attn.q_a_layernorm.weight", bf16, (d["q_lora_rank"],), "ones"),
            _Tensor(p + "self_attn.q_b_proj.weight", bf16, (heads * qk, d["q_lora_rank"])),
            _Tensor(p + "self_attn.kv_a_proj_with_mqa.weight", bf16, (d["kv_lora_rank"] + d["qk_rope_head_dim"], H)),
            _Tensor(p + "self_attn.kv_a_layernorm.weight", bf16, (d["kv_lora_rank"],), "ones"),
            _Tensor(p + "self_attn.kv_b_proj.weight", bf16,
                    (heads * (d["qk_nope_head_dim"] + d["v_head_dim"]), d["kv_lora_rank"])),
            _Tensor(p + "self_attn.o_proj.weight", bf16, (H, heads * d["v_head_dim"])),
            _Tensor(p + "post_attention_layernorm.weight", bf16, (H,), "ones"),
        ]
        if i == 0:  # first_k_dense_replace = 1
            inter = d["intermediate_size"]
            out += [
                _Tensor(p + "mlp.gate_proj.weight", bf16, (inter, H)),
                _Tensor(p + "mlp.up_proj.weight", bf16, (inter, H)),
                _Tensor(p + "mlp.down_proj.weight", bf16, (H, inter)),
            ]
            continue
        moe = d["moe_intermediate_size"]
        out += [
            _Tensor(p + "mlp.gate.weight", bf16, (d["n_routed_experts"], H)),
            _Tensor(p + "mlp.gate.e_score_correction_bias", "float32", (d["n_routed_experts"],), "zeros"),
            _Tensor(p + "mlp.shared_experts.gate_proj.weight", bf16, (moe, H)),
            _Tensor(p + "mlp.shared_experts.up_proj.weight", bf16, (moe, H)),
            _Tensor(p + "mlp.shared_experts.down_proj.weight", bf16, (H, moe)),
        ]
        for e in range(d["n_routed_experts"]):
            for proj, (rows, cols) in (("gate_proj", (moe, H)), ("up_proj", (moe, H)), ("down_proj", (H, moe))):
                q = f"{p}mlp.experts.{e}.{proj}."
                out += [  # compressed-tensors pack-quantized int4, group size 32
                    _Tensor(q + "weight_packed", "int32", (rows, cols // 8), "random"),
                    _Tensor(q + "weight_scale", bf16, (rows, cols // 32), "scale"),
                    _Tensor(q + "weight_shape", "int32", (2,), f"shape:{rows},{cols}"),
                ]
    V = d["vocab_size"]
    out += [
        _Tensor("language_model.model.embed_tokens.weight", bf16, (V, H)),
        _Tensor("language_model.model.norm.weight", bf16, (H,), "ones"),
        _Tensor("language_model.lm_head.weight", bf16, (V, H)),
    ]
    return out


def _kimi_vision_tensors(d: dict) -> list[_Tensor]:
    Dv, H, bf16 = d["vision_hidden"], d["hidden_size"], "bfloat16"
    out = [
        _Tensor("vision_tower.patch_embed.proj.weight", bf16, (Dv, 3, 2, 14, 14)),
        _Tensor("vision_tower.patch_embed.proj.bias", bf16, (Dv,), "zeros"),
        _Tensor("vision_tower.patch_embed.pos_emb.weight", bf16, (d["pos_emb"], d["pos_emb"], Dv)),
    ]
    for i in range(d["vision_layers"]):
        p = f"vision_tower.encoder.blocks.{i}."
        out += [
            _Tensor(p + "norm0.weight", bf16, (Dv,), "ones"),
            _Tensor(p + "norm0.bias", bf16, (Dv,), "zeros"),
            _Tensor(p + "wqkv.weight", bf16, (3 * Dv, Dv)),
            _Tensor(p + "wqkv.bias", bf16, (3 * Dv,), "zeros"),
            _Tensor(p + "wo.weight", bf16, (Dv, Dv)),
            _Tensor(p + "wo.bias", bf16, (Dv,), "zeros"),
            _Tensor(p + "norm1.weight", bf16, (Dv,), "ones"),
            _Tensor(p + "norm1.bias", bf16, (Dv,), "zeros"),
            _Tensor(p + "mlp.fc0.weight", bf16, (4 * Dv, Dv)),
            _Tensor(p + "mlp.fc0.bias", bf16, (4 * Dv,), "zeros"),
            _Tensor(p + "mlp.fc1.weight", bf16, (Dv, 4 * Dv)),
            _Tensor(p + "mlp.fc1.bias", bf16, (Dv,), "zeros"),
        ]
    merged = 4 * Dv  # 2x2 patch merge
    out += [
        _Tensor("vision_tower.encoder.final_layernorm.weight", bf16, (Dv,), "ones"),
        _Tensor("vision_tower.encoder.final_layernorm.bias", bf16, (Dv,), "zeros"),
        _Tensor("mm_projector.pre_norm.weight", bf16, (merged,), "ones"),
        _Tensor("mm_projector.pre_norm.bias", bf16, (merged,), "zeros"),
        _Tensor("mm_projector.proj.0.weight", bf16, (merged, merged)),
        _Tensor("mm_projector.proj.0.bias", bf16, (merged,), "zeros"),
        _Tensor("mm_projector.proj.2.weight", bf16, (H, merged)),
        _Tensor("mm_projector.proj.2.bias", bf16, (H,), "zeros"),
    ]
    return out


def _pack_shards(groups: list[list[_Tensor]], shard_bytes: int) -> list[list[_Tensor]]:
    """Fill shards in order up to shard_bytes; each group starts a new shard."""
    shards: list[list[_Tensor]] = []
    for group in groups:
        current: list[_Tensor] = []
        size = 0
        for t in group:
            if current and size + t.nbytes > shard_bytes:
                shards.append(current)
                current, size = [], 0
            current.append(t)
            size += t.nbytes
        if current:
            shards.append(current)
    return shards


def _tensor_bytes(t: _Tensor, spec: RepoSpec) -> bytearray:
    if t.fill.startswith("shape:"):
        return bytearray(b"".join(int(v).to_bytes(4, "little") for v in t.fill[6:].split(",")))
    if t.fill == "zeros":
        return bytearray(t.nbytes)
    if t.fill == "ones":  # bf16 1.0 = 0x3F80, float32 1.0 = 0x3F800000
        return bytearray((b"\x80\x3f" if t.dtype == "bfloat16" else b"\x00\x00\x80\x3f") * math.prod(t.shape))
    rng = random.Random(f"{GENERATOR_VERSION}:{spec.seed}:{spec.repo_id}:{t.name}")
    data = bytearray(rng.randbytes(t.nbytes))
    if t.dtype == "bfloat16":
        # Keep every value finite and small: fix the high byte's exponent bits so |x| is in
        # [2^-7, 2^-3); weights keep a random sign, scales are positive.
        table = _SCALE_TABLE if t.fill == "scale" else _WEIGHT_TABLE
        data[1::2] = data[1::2].translate(table)
    return data


_WEIGHT_TABLE = bytes((b & 0x80) | 0x3C | (b & 0x01) for b in range(256))
_SCALE_TABLE = bytes(0x3C | (b & 0x01) for b in range(256))


def _write_safetensors(path: Path, tensors: list[_Tensor], spec: RepoSpec) -> None:
    keep_alive = []
    specs = {}
    for t in tensors:
        data = _tensor_bytes(t, spec)
        buf = (ctypes.c_char * len(data)).from_buffer(data)
        keep_alive.append((data, buf))
        specs[t.name] = safetensors.TensorSpec(
            dtype=t.dtype, shape=list(t.shape), data_ptr=ctypes.addressof(buf), data_len=len(data)
        )
    safetensors.serialize_file(specs, str(path), metadata={"format": "pt"})
    del specs, keep_alive


# ---------------------------------------------------------------------------------------
# repo files


def _json(obj) -> str:
    return json.dumps(obj, indent=2) + "\n"


_GITATTRIBUTES = "".join(
    f"{pattern} filter=lfs diff=lfs merge=lfs -text\n"
    for pattern in ("*.bin", "*.model", "*.pt", "*.pth", "*.safetensors", "*.gguf", "*.onnx", "*.msgpack", "*.h5")
)


def _kimi_repo(spec: RepoSpec) -> dict[str, object]:
    def all_tensors(hidden):
        d = _kimi_dims(hidden)
        return _kimi_text_tensors(d) + _kimi_vision_tensors(d)

    d = _kimi_dims(_fit_hidden(all_tensors, spec.weight_bytes))
    shards = _pack_shards([_kimi_text_tensors(d), _kimi_vision_tensors(d)], spec.shard_bytes)
    names = [shard_name(i + 1, len(shards)) for i in range(len(shards))]
    files: dict[str, object] = dict(zip(names, shards))
    files["model.safetensors.index.json"] = _json({
        "metadata": {"total_size": sum(t.nbytes for s in shards for t in s)},
        "weight_map": {t.name: n for n, s in sorted(zip(names, shards)) for t in s},
    })
    V = d["vocab_size"]
    special = {"bos": V - 256, "eos": V - 255, "im_end": V - 253, "pad": V - 251, "media": V - 220}
    files["config.json"] = _json(_kimi_config(d, special))
    files["generation_config.json"] = _json({
        "bos_token_id": special["bos"], "eos_token_id": special["im_end"], "pad_token_id": special["pad"],
        "max_length": 262144, "temperature": 1.0, "top_p": 0.95, "transformers_version": "4.57.1",
    })
    files["tokenizer_config.json"] = _json(_kimi_tokenizer_config(special))
    files["tiktoken.model"] = _tiktoken_model(V - 256, spec)
    files["chat_template.jinja"] = _CHAT_TEMPLATE
    files["preprocessor_config.json"] = _json({
        "image_processor_type": "KimiK25VisionProcessor", "processor_class": "KimiK25Processor",
        "patch_size": 14, "merge_kernel_size": [2, 2], "in_patch_limit": 16384, "patch_limit_on_one_side": 512,
        "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    })
    files["configuration_kimi_k25.py"] = _CONFIGURATION_PY
    files["modeling_kimi_k25.py"] = _MODELING_PY
    files["tokenization_kimi.py"] = _TOKENIZATION_PY
    files["README.md"] = _KIMI_README
    files[".gitattributes"] = _GITATTRIBUTES
    return files


def _kimi_config(d: dict, special: dict) -> dict:
    text = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "kimi_k2",
        "hidden_size": d["hidden_size"],
        "intermediate_size": d["intermediate_size"],
        "moe_intermediate_size": d["moe_intermediate_size"],
        "num_hidden_layers": d["num_hidden_layers"],
        "num_nextn_predict_layers": 0,
        "num_attention_heads": d["num_attention_heads"],
        "num_key_value_heads": d["num_attention_heads"],
        "n_routed_experts": d["n_routed_experts"],
        "n_shared_experts": d["n_shared_experts"],
        "num_experts_per_tok": d["num_experts_per_tok"],
        "first_k_dense_replace": 1,
        "moe_layer_freq": 1,
        "n_group": 1,
        "topk_group": 1,
        "topk_method": "noaux_tc",
        "scoring_func": "sigmoid",
        "norm_topk_prob": True,
        "routed_scaling_factor": 2.827,
        "q_lora_rank": d["q_lora_rank"],
        "kv_lora_rank": d["kv_lora_rank"],
        "qk_nope_head_dim": d["qk_nope_head_dim"],
        "qk_rope_head_dim": d["qk_rope_head_dim"],
        "v_head_dim": d["v_head_dim"],
        "vocab_size": d["vocab_size"],
        "max_position_embeddings": 262144,
        "rope_theta": 50000.0,
        "rope_scaling": {"type": "yarn", "factor": 64.0, "original_max_position_embeddings": 4096,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0},
        "rms_norm_eps": 1e-05,
        "hidden_act": "silu",
        "tie_word_embeddings": False,
        "bos_token_id": special["bos"],
        "eos_token_id": special["im_end"],
        "pad_token_id": special["pad"],
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "compressed-tensors",
            "format": "pack-quantized",
            "quantization_status": "compressed",
            "config_groups": {"group_0": {
                "targets": ["Linear"],
                "weights": {"num_bits": 4, "group_size": 32, "strategy": "group", "type": "int",
                            "symmetric": True, "dynamic": False, "actorder": None, "observer": "minmax"},
                "input_activations": None, "output_activations": None,
            }},
            "ignore": ["lm_head", "re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|down)_proj.*",
                       "re:vision_tower.*", "re:mm_projector.*"],
            "kv_cache_scheme": None,
        },
    }
    vision = {
        "model_type": "moonvit",
        "patch_size": 14,
        "init_pos_emb_height": d["pos_emb"],
        "init_pos_emb_width": d["pos_emb"],
        "init_pos_emb_time": 4,
        "pos_emb_type": "divided_fixed",
        "vt_num_attention_heads": 2,
        "vt_num_hidden_layers": d["vision_layers"],
        "vt_hidden_size": d["vision_hidden"],
        "vt_intermediate_size": 4 * d["vision_hidden"],
        "merge_kernel_size": [2, 2],
        "merge_type": "sd2_tpool",
        "mm_projector_type": "patchmerger",
        "mm_hidden_size": d["vision_hidden"],
        "projector_hidden_act": "gelu",
        "projector_ln_eps": 1e-05,
        "text_hidden_size": d["hidden_size"],
    }
    return {
        "architectures": ["KimiK25ForConditionalGeneration"],
        "auto_map": {
            "AutoConfig": "configuration_kimi_k25.KimiK25Config",
            "AutoModel": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
            "AutoModelForCausalLM": "modeling_kimi_k25.KimiK25ForConditionalGeneration",
        },
        "model_type": "kimi_k25",
        "media_placeholder_token_id": special["media"],
        "pad_token_id": special["pad"],
        "ignore_index": -100,
        "text_config": text,
        "vision_config": vision,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
        "use_unified_vision_chunk": True,
        "video_placeholder": "<|kimi_k25_video_placeholder|>",
    }


def _kimi_tokenizer_config(special: dict) -> dict:
    names = {"bos": "[BOS]", "eos": "[EOS]", "im_end": "<|im_end|>", "pad": "[PAD]", "media": "<|media_pad|>"}
    return {
        "auto_map": {"AutoTokenizer": ["tokenization_kimi.TikTokenTokenizer", None]},
        "tokenizer_class": "TikTokenTokenizer",
        "bos_token": names["bos"],
        "eos_token": names["im_end"],
        "pad_token": names["pad"],
        "unk_token": "[UNK]",
        "model_max_length": 1000000000000000019884624838656,
        "added_tokens_decoder": {
            str(special[k]): {"content": v, "lstrip": False, "normalized": False, "rstrip": False,
                              "single_word": False, "special": True}
            for k, v in names.items()
        },
    }


def _tiktoken_model(n_tokens: int, spec: RepoSpec) -> bytes:
    """tiktoken's BPE file format: one ``base64(token bytes) rank`` line per token."""
    import base64

    rng = random.Random(f"{GENERATOR_VERSION}:{spec.seed}:{spec.repo_id}:tiktoken")
    tokens = [bytes([b]) for b in range(256)]
    seen = set(tokens)
    while len(tokens) < n_tokens:
        tok = rng.randbytes(rng.randint(2, 6))
        if tok not in seen:
            seen.add(tok)
            tokens.append(tok)
    return b"".join(base64.b64encode(t) + b" %d\n" % i for i, t in enumerate(tokens[:n_tokens]))


def _dflash_tensors(hidden: int) -> list[_Tensor]:
    bf16, heads, kv_heads = "bfloat16", 4, 2
    head_dim = hidden // heads
    out = [
        _Tensor("fc.weight", bf16, (hidden, 5 * hidden)),  # fuses hidden states of 5 target layers
        _Tensor("hidden_norm.weight", bf16, (hidden,), "ones"),
    ]
    for i in range(2):
        p = f"layers.{i}."
        out += [
            _Tensor(p + "input_layernorm.weight", bf16, (hidden,), "ones"),
            _Tensor(p + "self_attn.q_proj.weight", bf16, (heads * head_dim, hidden)),
            _Tensor(p + "self_attn.k_proj.weight", bf16, (kv_heads * head_dim, hidden)),
            _Tensor(p + "self_attn.v_proj.weight", bf16, (kv_heads * head_dim, hidden)),
            _Tensor(p + "self_attn.o_proj.weight", bf16, (hidden, heads * head_dim)),
            _Tensor(p + "self_attn.q_norm.weight", bf16, (head_dim,), "ones"),
            _Tensor(p + "self_attn.k_norm.weight", bf16, (head_dim,), "ones"),
            _Tensor(p + "post_attention_layernorm.weight", bf16, (hidden,), "ones"),
            _Tensor(p + "mlp.gate_proj.weight", bf16, (2 * hidden, hidden)),
            _Tensor(p + "mlp.up_proj.weight", bf16, (2 * hidden, hidden)),
            _Tensor(p + "mlp.down_proj.weight", bf16, (hidden, 2 * hidden)),
        ]
    out.append(_Tensor("norm.weight", bf16, (hidden,), "ones"))
    return out


def _dflash_repo(spec: RepoSpec) -> dict[str, object]:
    hidden = _fit_hidden(_dflash_tensors, spec.weight_bytes)
    config = {
        "architectures": ["DFlashDraftModel"],
        "auto_map": {"AutoModel": "dflash.DFlashDraftModel"},
        "model_type": "qwen3",
        "block_size": 16,
        "dflash_config": {"mask_token_id": 163838, "target_layer_ids": [1, 2, 3, 4, 5]},
        "num_target_layers": 6,
        "hidden_size": hidden,
        "intermediate_size": 2 * hidden,
        "num_hidden_layers": 2,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "head_dim": hidden // 4,
        "hidden_act": "silu",
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "max_position_embeddings": 262144,
        "vocab_size": 163840,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.57.1",
    }
    return {
        "config.json": _json(config),
        "model.safetensors": _dflash_tensors(hidden),
        "README.md": _DRAFT_README,
        ".gitattributes": _GITATTRIBUTES,
    }


_KIMI_README = """\
---
license: other
license_name: modified-mit
library_name: transformers
pipeline_tag: image-text-to-text
---
# Kimi-K2.6 (noderig lab lookalike)

Generated by `noderig.lab.checkpoints`: same file names, tensor names, index and config
layout as `moonshotai/Kimi-K2.6`, with tiny dimensions and pseudo-random weights. It is not
a model; it exists so the deploy can be tested end to end without the internet.

Deploy with SGLang: `--trust-remote-code --tp 8 --tool-call-parser kimi_k2 --reasoning-parser kimi_k2`.
"""

_DRAFT_README = """\
---
license: mit
library_name: transformers
extra_gated_prompt: You agree to use this draft model only in the noderig lab.
extra_gated_fields:
  I agree: checkbox
---
# Kimi-K2.6-DFlash (noderig lab lookalike)

A tiny, gated stand-in for the DFlash block-diffusion draft model of Kimi K2.6
(`block_size` 16), generated by `noderig.lab.checkpoints`. Not a model.
"""

_CHAT_TEMPLATE = """\
{%- for message in messages -%}
{%- if message['role'] == 'system' -%}<|im_system|>system<|im_middle|>
{%- elif message['role'] == 'user' -%}<|im_user|>user<|im_middle|>
{%- else -%}<|im_assistant|>assistant<|im_middle|>
{%- endif -%}
{%- if message['content'] is string -%}{{ message['content'] }}
{%- else -%}{%- for part in message['content'] -%}
{%- if part['type'] == 'text' -%}{{ part['text'] }}
{%- else -%}<|media_start|>image<|media_content|><|media_pad|><|media_end|>
{%- endif -%}{%- endfor -%}
{%- endif -%}<|im_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>
{%- if thinking is defined and not thinking -%}<think></think>{%- else -%}<think>{%- endif -%}
{%- endif -%}
"""

_CONFIGURATION_PY = '''\
"""Kimi K2.5/K2.6 configuration (noderig lab stand-in: the class names of the real remote code)."""

try:
    from transformers.configuration_utils import PretrainedConfig
except ImportError:  # the lab's stand-in server does not need transformers
    PretrainedConfig = object


class KimiK25Config(PretrainedConfig):
    model_type = "kimi_k25"

    def __init__(self, text_config=None, vision_config=None, **kwargs):
        self.text_config = text_config or {}
        self.vision_config = vision_config or {}
        if PretrainedConfig is not object:
            super().__init__(**kwargs)
'''

_MODELING_PY = '''\
"""Kimi K2.5/K2.6 modeling (noderig lab stand-in): the lab checkpoint is not a real model."""


class KimiK25ForConditionalGeneration:
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("the noderig lab checkpoint has pseudo-random weights and cannot run")
'''

_TOKENIZATION_PY = '''\
"""Kimi tokenizer (noderig lab stand-in): reads tiktoken.model lines ``base64(token) rank``."""

import base64


class TikTokenTokenizer:
    def __init__(self, vocab_file="tiktoken.model", **kwargs):
        with open(vocab_file, "rb") as f:
            self.ranks = {base64.b64decode(tok): int(rank) for tok, rank in (line.split() for line in f if line.strip())}
'''
