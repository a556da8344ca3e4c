"""Multimodal embedding: run the encoder per item and splice the result into the text embeddings."""

from typing import Callable, Dict, List

from sglang.srt.managers.schedule_batch import ForwardBatch, MultimodalDataItem

# Encoder outputs keyed by item hash, so chunked prefill does not re-run the vision tower.
_embedding_cache: Dict[str, List[float]] = {}


def _get_chunked_embedding_by_item(
    data_embedding_func: Callable[[List[MultimodalDataItem]], List[float]],
    embedding_items: List[MultimodalDataItem],
    prefix_length: int,
    extend_length: int,
) -> List[float]:
    embedding = []
    for item in embedding_items:
        item_embedding = _embedding_cache.get(item.hash)
        if item_embedding is None:
            item_embedding = data_embedding_func([item])
            _embedding_cache[item.hash] = item_embedding
        embedding.extend(item_embedding)
    return embedding[prefix_length: prefix_length + extend_length] or embedding


def get_embedding_and_mask(data_embedding_func, embedding_items, forward_batch: ForwardBatch):
    embedding = _get_chunked_embedding_by_item(
        data_embedding_func, embedding_items, forward_batch.extend_prefix_len, forward_batch.extend_seq_len
    )
    mask = [i < len(embedding) for i in range(forward_batch.extend_seq_len)]
    return embedding, mask


def embed_mm_inputs(forward_batch: ForwardBatch, input_embeds: List[float], data_embedding_funcs: Dict[str, Callable]):
    for modality, data_embedding_func in data_embedding_funcs.items():
        items = [item for item in forward_batch.mm_items if item.modality == modality]
        if not items:
            continue
        embedding, mask = get_embedding_and_mask(data_embedding_func, items, forward_batch)
        input_embeds = [embedding[i] if keep else x for i, (x, keep) in enumerate(zip(input_embeds, mask))]
    return input_embeds


def general_mm_embed_routine(input_ids, forward_batch: ForwardBatch, language_model, data_embedding_funcs):
    input_embeds = language_model.embed_tokens(input_ids)
    if forward_batch.contains_mm_inputs():
        input_embeds = embed_mm_inputs(forward_batch, input_embeds, data_embedding_funcs)
    return language_model(input_embeds)
