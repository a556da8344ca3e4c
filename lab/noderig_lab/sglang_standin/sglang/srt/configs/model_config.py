"""The parts of a Hugging Face config.json the server needs, read the way SGLang reads them."""

import json
import os
from dataclasses import dataclass, field


def get_hf_config(model_path: str) -> dict:
    """Read config.json; fail with the error transformers raises for a local checkout."""
    if not os.path.isdir(model_path):
        raise OSError(
            f"Incorrect path_or_model_id: '{model_path}'. Please provide either the path to a "
            "local folder or the repo_id of a model on the Hub."
        )
    config_file = os.path.join(model_path, "config.json")
    if not os.path.isfile(config_file):
        raise OSError(
            f"{model_path} does not appear to have a file named config.json. Checkout "
            f"'https://huggingface.co/{model_path}/tree/None' for available files."
        )
    with open(config_file) as f:
        return json.load(f)


@dataclass
class ModelConfig:
    model_path: str
    hf_config: dict = field(repr=False)
    context_len: int = 0

    @classmethod
    def from_path(cls, model_path: str, context_length: int | None = None) -> "ModelConfig":
        config = cls(model_path, get_hf_config(model_path))
        derived = int(config.text_config.get("max_position_embeddings", 4096))
        if context_length is not None and context_length > derived:
            if os.environ.get("SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN", "") not in ("1", "true", "True"):
                raise ValueError(
                    f"User-specified context_length ({context_length}) is greater than the derived "
                    f"context_length ({derived}). This may lead to incorrect model outputs or CUDA "
                    "errors. To allow overriding this maximum, set the env var "
                    "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"
                )
        config.context_len = context_length or derived
        return config

    @property
    def text_config(self) -> dict:
        # Kimi K2.5/K2.6 nest the DeepSeek-V3 text stack under text_config.
        return self.hf_config.get("text_config") or self.hf_config

    @property
    def architecture(self) -> str:
        return (self.hf_config.get("architectures") or ["LlamaForCausalLM"])[0]

    @property
    def has_image_understanding(self) -> bool:
        return "vision_config" in self.hf_config

    @property
    def is_mla(self) -> bool:
        return "kv_lora_rank" in self.text_config

    @property
    def num_layers(self) -> int:
        return int(self.text_config.get("num_hidden_layers", 32))

    @property
    def dtype(self) -> str:
        return self.text_config.get("torch_dtype") or self.hf_config.get("torch_dtype") or "bfloat16"

    def kv_bytes_per_token(self) -> int:
        text = self.text_config
        if self.is_mla:  # MLA caches the compressed latent plus the rope part
            per_layer = int(text["kv_lora_rank"]) + int(text.get("qk_rope_head_dim", 64))
        else:
            heads = int(text.get("num_key_value_heads", text.get("num_attention_heads", 8)))
            head_dim = int(text.get("head_dim", int(text.get("hidden_size", 4096)) // int(text.get("num_attention_heads", 32))))
            per_layer = 2 * heads * head_dim
        return self.num_layers * per_layer * 2  # bf16
