"""A text-only decoder stand-in: deterministic 'hidden states' and next tokens, no numerics."""

import zlib


class CausalLMStandin:
    """Named after the checkpoint's architecture (see model_class_for) so logs show e.g. DeepseekV3ForCausalLM."""

    def __init__(self, config: dict, vocab_size: int | None = None):
        self.config = config
        self.vocab_size = int(vocab_size or config.get("vocab_size", 163840))

    def embed_tokens(self, input_ids):
        return [((i * 2654435761) % 1000) / 1000.0 for i in input_ids]

    def __call__(self, input_embeds):
        return input_embeds

    def next_token(self, hidden_states, step: int) -> int:
        seed = zlib.crc32(repr((round(sum(hidden_states), 6), len(hidden_states), step)).encode())
        return seed % self.vocab_size

    def forward(self, input_ids, forward_batch):
        return self(self.embed_tokens(input_ids))

    def load_weights(self, weights):
        return [name for name, _ in weights]


def model_class_for(architecture: str):
    return type(architecture, (CausalLMStandin,), {})
