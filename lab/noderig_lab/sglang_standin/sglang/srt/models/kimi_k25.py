"""Kimi K2.5/K2.6: MoonViT vision tower + projector in front of a DeepSeek-V3 text stack.

Same class and method names as SGLang's models/kimi_k25.py, so a vision-path failure
produces a traceback through get_image_feature and the vision tower like the real one.
"""

from sglang.srt.layers.attention.vision import VisionAttention
from sglang.srt.managers.mm_utils import general_mm_embed_routine
from sglang.srt.models.causal_lm import model_class_for


class MoonViTEncoderLayer:
    def __init__(self, layer_id: int, vision_config: dict, mm_attention_backend):
        self.attn = VisionAttention(
            embed_dim=int(vision_config.get("vt_hidden_size", vision_config.get("hidden_size", 1152))),
            num_heads=int(vision_config.get("vt_num_attention_heads", vision_config.get("num_attention_heads", 16))),
            qkv_backend=mm_attention_backend,
            prefix=f"vision_tower.encoder.blocks.{layer_id}.attn",
        )

    def forward(self, hidden_states, cu_seqlens):
        return self.attn.forward(hidden_states, cu_seqlens=cu_seqlens)


class MoonViT3dPretrainedModel:
    def __init__(self, vision_config: dict, mm_attention_backend):
        # Two blocks are enough to exercise the path; the real tower has 27.
        self.blocks = [MoonViTEncoderLayer(i, vision_config, mm_attention_backend) for i in range(2)]

    def forward(self, pixel_values, grid_thws):
        cu_seqlens = [0]
        for t, h, w in grid_thws:
            cu_seqlens.append(cu_seqlens[-1] + t * h * w)
        hidden_states = (pixel_values * (cu_seqlens[-1] // max(1, len(pixel_values)) + 1))[: cu_seqlens[-1]]
        for block in self.blocks:
            hidden_states = block.forward(hidden_states, cu_seqlens)
        return hidden_states


class K2VLMultiModalProjector:
    def __call__(self, image_features):
        # 2x2 patch merge, as the real projector does before its MLP.
        return [sum(image_features[i: i + 4]) / 4 for i in range(0, len(image_features), 4)]


class KimiK25ForConditionalGeneration:
    def __init__(self, hf_config: dict, mm_attention_backend=None):
        text_config = hf_config.get("text_config") or hf_config
        self.vision_tower = MoonViT3dPretrainedModel(hf_config["vision_config"], mm_attention_backend)
        self.mm_projector = K2VLMultiModalProjector()
        self.language_model = model_class_for("DeepseekV3ForCausalLM")(text_config)

    def get_image_feature(self, items):
        pixel_values = [value for item in items for value in item.feature]
        grid_thws = [item.image_grid_thw for item in items]
        image_features = self.vision_tower.forward(pixel_values, grid_thws)
        return self.mm_projector(image_features)

    def forward(self, input_ids, forward_batch):
        return general_mm_embed_routine(
            input_ids=input_ids,
            forward_batch=forward_batch,
            language_model=self.language_model,
            data_embedding_funcs={"image": self.get_image_feature},
        )

    def next_token(self, hidden_states, step: int) -> int:
        return self.language_model.next_token(hidden_states, step)

    def load_weights(self, weights):
        return [name for name, _ in weights]

