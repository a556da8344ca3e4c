"""FA4 (FlashAttention CuTe DSL) entry points, imported lazily like SGLang's vendored wrapper.

The import is attempted once at module import; when it fails the error is kept and raised,
chained, on the first call. That is why a node without flash_attn.cute starts fine and
only dies when the vision tower first runs (the server warmup, for a VLM).
"""

try:
    from flash_attn.cute import flash_attn_varlen_func as _flash_attn_varlen_func
    _flash_attn_import_error = None
except ImportError as e:
    _flash_attn_varlen_func = None
    _flash_attn_import_error = e


def flash_attn_varlen_func(q, k, v, cu_seqlens_q=None, cu_seqlens_k=None, max_seqlen_q=None,
                           max_seqlen_k=None, softmax_scale=None, causal=False, return_softmax_lse=False):
    if _flash_attn_varlen_func is None:  # pragma: no cover
        raise ImportError(
            "Vendored FlashAttention CUTE is not available (cannot import "
            "flash_attn.cute). Please check your source tree."
        ) from _flash_attn_import_error
    result = _flash_attn_varlen_func(q=q, k=k, v=v, cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k,
                                     max_seqlen_q=max_seqlen_q, max_seqlen_k=max_seqlen_k,
                                     softmax_scale=softmax_scale, causal=causal)
    return result if return_softmax_lse or not isinstance(result, tuple) else result[0]
