"""What one scheduled request carries into the model: token ids and multimodal items."""

import hashlib
from dataclasses import dataclass, field
from typing import List


@dataclass
class MultimodalDataItem:
    modality: str  # "image"
    feature: List[float]  # stands in for pixel_values
    image_grid_thw: tuple  # (t, h, w) in 14-pixel patches, as MoonViT expects

    @property
    def hash(self) -> str:
        return hashlib.sha256(repr((self.modality, self.image_grid_thw, self.feature)).encode()).hexdigest()


@dataclass
class ForwardBatch:
    rid: str
    input_ids: List[int]
    mm_items: List[MultimodalDataItem] = field(default_factory=list)
    extend_prefix_len: int = 0

    @property
    def extend_seq_len(self) -> int:
        return len(self.input_ids) - self.extend_prefix_len

    def contains_mm_inputs(self) -> bool:
        return bool(self.mm_items)

    @classmethod
    def from_request(cls, req: dict) -> "ForwardBatch":
        items = [MultimodalDataItem("image", image["pixel_values"], tuple(image["grid_thw"])) for image in req.get("images", [])]
        return cls(rid=req["rid"], input_ids=req["input_ids"], mm_items=items)
