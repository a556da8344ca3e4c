"""Vision-tower attention with SGLang's per-backend dispatch (--mm-attention-backend)."""

from sglang.jit_kernel.flash_attention_v4 import flash_attn_varlen_func


def _bidirectional_mean(q, cu_seqlens):
    """Pure-Python placeholder for attention over each image's patches (no numerics implied)."""
    out = []
    for start, end in zip(cu_seqlens, cu_seqlens[1:]):
        mean = sum(q[start:end]) / max(1, end - start)
        out.extend([mean] * (end - start))
    return out


class VisionSdpaAttention:
    def forward(self, q, k, v, cu_seqlens):
        return _bidirectional_mean(q, cu_seqlens)


class VisionTritonAttention(VisionSdpaAttention):
    pass


class VisionFlash4Attention:
    def forward(self, q, k, v, cu_seqlens):
        max_seqlen = max(b - a for a, b in zip(cu_seqlens, cu_seqlens[1:]))
        return flash_attn_varlen_func(q, k, v, cu_seqlens_q=cu_seqlens, cu_seqlens_k=cu_seqlens,
                                      max_seqlen_q=max_seqlen, max_seqlen_k=max_seqlen)


QKV_BACKENDS = {"sdpa": VisionSdpaAttention, "triton_attn": VisionTritonAttention, "fa3": VisionSdpaAttention,
                "fa4": VisionFlash4Attention}


class VisionAttention:
    def __init__(self, embed_dim: int, num_heads: int, qkv_backend, prefix: str = ""):
        # With no --mm-attention-backend, SGLang picks fa4 on Blackwell; the stand-in plays a B300.
        self.qkv_backend = QKV_BACKENDS.get(qkv_backend or "fa4", VisionSdpaAttention)()
        self.embed_dim, self.num_heads, self.prefix = embed_dim, num_heads, prefix

    def forward(self, hidden_states, cu_seqlens):
        q = k = v = hidden_states
        return self.qkv_backend.forward(q, k, v, cu_seqlens=cu_seqlens)
