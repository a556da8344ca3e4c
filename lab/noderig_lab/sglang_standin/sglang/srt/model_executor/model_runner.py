"""ModelRunner: one rank's model init, logged with SGLang's milestones, on a pretend B300.

Memory figures are fake but consistent (free memory only goes down); everything that can
be real is: the checkpoint headers are parsed and the Triton-style C build really runs.
"""

import logging
import os
import time

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.jit.build import CudaUtils
from sglang.srt.layers.attention.flashinfer_backend import FlashInferMLAAttnBackend
from sglang.srt.managers.schedule_batch import ForwardBatch
from sglang.srt.model_loader.weight_utils import list_safetensors_files, safetensors_weights_iterator
from sglang.srt.models.causal_lm import model_class_for
from sglang.srt.models.kimi_k25 import KimiK25ForConditionalGeneration
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils import standin_sleep

logger = logging.getLogger(__name__)

B300_TOTAL_GB = 288.0  # HBM3e
B300_FREE_GB = 275.0  # what torch reports free on an idle B300
# Full-size weight footprints, so a tiny lab checkpoint still logs Kimi-K2.6-like numbers.
NOMINAL_WEIGHTS_GB = {"KimiK25ForConditionalGeneration": 595.18, "DFlashDraftModel": 6.48}
NOMINAL_KV_BYTES_PER_TOKEN = {"KimiK25ForConditionalGeneration": 61 * (512 + 64) * 2}  # MLA latent + rope, bf16
# Activations of one forward at the largest captured batch size (MoE dispatch buffers, the
# logits of every draft token), outside the static pool: what --mem-fraction-static leaves room
# for. Nominal, for the target model; a draft model's are small.
CAPTURE_ACTIVATIONS_GB = 16.0
DRAFT_CAPTURE_ACTIVATIONS_GB = 0.5
CUDA_GRAPH_CAPTURE_FAILED_MSG = (
    "Possible solutions:\n"
    "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
    "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
    "3. disable torch compile by not using --enable-torch-compile\n"
    "4. disable CUDA graph by --disable-cuda-graph. (Not recommended. Huge performance loss)\n"
    "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
)


class OutOfMemoryError(RuntimeError):
    """Named like torch's, so tracebacks read the same."""


OutOfMemoryError.__module__ = "torch"
OutOfMemoryError.__qualname__ = "OutOfMemoryError"


class FakeGpuMemory:
    def __init__(self, tp_rank: int):
        self.gpu_id = tp_rank % 8
        self.avail = B300_FREE_GB - 0.03 * self.gpu_id

    def use(self, gb: float) -> float:
        self.avail -= gb
        return gb

    def need(self, gb: float) -> None:
        """A transient allocation of ``gb`` (freed right after): torch's OOM when it does not fit."""
        if gb > self.avail:
            in_use = B300_TOTAL_GB - self.avail
            raise OutOfMemoryError(
                f"CUDA out of memory. Tried to allocate {gb:.2f} GiB. GPU {self.gpu_id} has a total capacity of "
                f"{B300_TOTAL_GB:.2f} GiB of which {self.avail:.2f} GiB is free. Including non-PyTorch memory, "
                f"this process has {in_use:.2f} GiB memory in use. Of the allocated memory {in_use - 0.5:.2f} GiB is "
                "allocated by PyTorch, and 512.00 MiB is reserved by PyTorch but unallocated. If reserved but "
                "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
                "fragmentation.  See documentation for Memory Management  "
                "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")


class ModelRunner:
    def __init__(self, model_config: ModelConfig, server_args: ServerArgs, tp_rank: int, gpu: FakeGpuMemory,
                 is_draft_worker: bool = False):
        self.model_config, self.server_args, self.tp_rank, self.gpu = model_config, server_args, tp_rank, gpu
        self.gpu_id = tp_rank % 8
        self.is_draft_worker = is_draft_worker
        self.device_properties = None
        if not is_draft_worker:
            self.init_torch_distributed()
        self.load_model()
        if not is_draft_worker:
            self.init_memory_pool()
            self.init_attention_backend()
        self.init_cuda_graphs()

    def init_torch_distributed(self):
        logger.info("Init torch distributed begin.")
        standin_sleep(0.04)
        used = self.gpu.use(0.37 if self.server_args.tp_size > 1 else 0.0)
        logger.info(f"Init torch distributed ends. mem usage={used:.2f} GB")

    def load_model(self):
        before = self.gpu.avail
        logger.info(f"Load weight begin. avail mem={before:.2f} GB")
        config = self.model_config
        if config.has_image_understanding:
            self.model = KimiK25ForConditionalGeneration(config.hf_config, self.server_args.mm_attention_backend)
        else:
            self.model = model_class_for(config.architecture)(config.text_config)
        files = list_safetensors_files(config.model_path)
        show_progress = self.tp_rank == 0 and not self.is_draft_worker
        load_seconds = 0.06 if self.is_draft_worker else 0.14
        self.model.load_weights(safetensors_weights_iterator(files, show_progress, load_seconds / len(files)))
        real_gb = sum(os.path.getsize(path) for path in files) / 1e9
        weights_gb = max(real_gb, NOMINAL_WEIGHTS_GB.get(config.architecture, 0.0)) / self.server_args.tp_size
        self.gpu.use(min(weights_gb, 0.7 * self.gpu.avail))
        logger.info(
            f"Load weight end. type={type(self.model).__name__}, dtype=torch.{config.dtype}, "
            f"avail mem={self.gpu.avail:.2f} GB, mem usage={before - self.gpu.avail:.2f} GB."
        )

    def init_memory_pool(self):
        per_token = NOMINAL_KV_BYTES_PER_TOKEN.get(self.model_config.architecture) or self.model_config.kv_bytes_per_token()
        if not self.model_config.is_mla:
            per_token //= self.server_args.tp_size  # MHA heads are sharded; MLA's latent is replicated
        static_budget = B300_FREE_GB * self.server_args.mem_fraction_static - (B300_FREE_GB - self.gpu.avail)
        kv_gb = max(1.0, static_budget)
        self.max_total_num_tokens = self.server_args.max_total_tokens or int(kv_gb * 1e9 // per_token)
        kv_gb = self.gpu.use(self.max_total_num_tokens * per_token / 1e9)
        standin_sleep(0.04)
        if self.model_config.is_mla:
            logger.info(f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, KV size: {kv_gb:.2f} GB")
        else:
            logger.info(f"KV Cache is allocated. #tokens: {self.max_total_num_tokens}, "
                        f"K size: {kv_gb / 2:.2f} GB, V size: {kv_gb / 2:.2f} GB")
        logger.info(f"Memory pool end. avail mem={self.gpu.avail:.2f} GB")

    def init_attention_backend(self):
        # The first Triton kernel in a process builds Triton's C launcher: a real gcc run.
        self.device_properties = CudaUtils().get_device_properties(self.gpu_id)
        if self.server_args.attention_backend == "flashinfer":
            self.attn_backend = FlashInferMLAAttnBackend(self)

    def capture_batch_sizes(self) -> list[int]:
        if self.server_args.cuda_graph_bs:
            return sorted(self.server_args.cuda_graph_bs)
        max_bs = self.server_args.cuda_graph_max_bs or (48 if self.server_args.speculative_algorithm else 256)
        if self.server_args.max_running_requests:
            max_bs = min(max_bs, self.server_args.max_running_requests)
        candidates = [1, 2, 4, 8, 12] + list(range(16, 257, 8)) + list(range(272, 513, 16))
        return [bs for bs in candidates if bs <= max_bs]

    def init_cuda_graphs(self):
        if self.server_args.disable_cuda_graph:
            return
        kind = "draft cuda graph" if self.is_draft_worker else "cuda graph"
        start, before = time.monotonic(), self.gpu.avail
        logger.info(f"Capture {kind} begin. This can take up to several minutes. avail mem={before:.2f} GB")
        batch_sizes = self.capture_batch_sizes()
        if self.tp_rank == 0 and not self.is_draft_worker:
            logger.info(f"Capture cuda graph bs {batch_sizes}")
        try:
            self.capture(batch_sizes)
        except RuntimeError as e:  # torch's OOM included, as SGLang's CudaGraphRunner reports it
            raise Exception(f"Capture cuda graph failed: {e}\n{CUDA_GRAPH_CAPTURE_FAILED_MSG}")
        # Custom all-reduce exists only with TP > 1; it registers its buffers when a capture ends.
        if self.server_args.tp_size > 1 and not self.server_args.disable_custom_all_reduce and self.tp_rank == 0:
            addresses = len(batch_sizes) * (2 * self.model_config.num_layers + 1)
            logger.info(f"Registering {addresses} cuda graph addresses")
        logger.info(
            f"Capture {kind} end. Time elapsed: {time.monotonic() - start:.2f} s. "
            f"mem usage={before - self.gpu.avail:.2f} GB. avail mem={self.gpu.avail:.2f} GB."
        )

    def capture(self, batch_sizes: list[int]) -> None:
        # Each batch size runs once before it is recorded, the largest first: its activations
        # must fit beside the static pool.
        self.gpu.need(DRAFT_CAPTURE_ACTIVATIONS_GB if self.is_draft_worker else CAPTURE_ACTIVATIONS_GB)
        standin_sleep(0.12 if self.is_draft_worker else 0.2)
        self.gpu.use(0.02 * len(batch_sizes) + 0.4)

    def forward(self, batch: ForwardBatch):
        return self.model.forward(batch.input_ids, batch)
