"""ServerArgs: the real flag spellings and aliases (SGLang 0.5.9 argparse + this fork's DFLASH/DDTREE)."""

import argparse
import dataclasses
import logging
from dataclasses import dataclass
from typing import List, Optional

from sglang.srt.configs.model_config import ModelConfig, get_hf_config

logger = logging.getLogger(__name__)

ATTENTION_BACKEND_CHOICES = [
    "triton", "torch_native", "flex_attention", "nsa", "cutlass_mla", "fa3", "fa4", "flashinfer",
    "flashmla", "trtllm_mla", "trtllm_mha", "dual_chunk_flash_attn", "aiter", "wave", "intel_amx",
    "ascend", "intel_xpu",
]
MM_ATTENTION_BACKEND_CHOICES = ["sdpa", "fa3", "fa4", "triton_attn", "ascend_attn", "aiter_attn"]
REASONING_PARSER_CHOICES = [
    "deepseek-r1", "deepseek-v3", "glm45", "gpt-oss", "kimi", "kimi_k2", "qwen3", "qwen3-thinking",
    "minimax", "minimax-append-think", "step3", "nano_v3", "interns1",
]
TOOL_CALL_PARSER_CHOICES = [
    "deepseekv3", "deepseekv31", "deepseekv32", "glm", "glm45", "glm47", "gpt-oss", "kimi_k2",
    "llama3", "mistral", "pythonic", "qwen", "qwen25", "qwen3_coder", "step3", "minimax-m2", "interns1",
]
SPECULATIVE_ALGORITHM_CHOICES = ["EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "NGRAM", "DFLASH", "DDTREE"]
KV_CACHE_DTYPE_CHOICES = ["auto", "fp8_e5m2", "fp8_e4m3", "bf16", "bfloat16", "fp4_e2m1"]
# Page sizes the MLA kernels accept, the one SGLang forces otherwise, and the warning it prints.
FORCED_PAGE_SIZE = {
    "trtllm_mla": ((32, 64), 64, "TensorRT-LLM MLA only supports page_size of 32 or 64, changing page_size from {} to 64."),
    "flashmla": ((64,), 64, "FlashMLA only supports a page_size of 64, change page_size to 64."),
    "cutlass_mla": ((128,), 128, "Cutlass MLA only supports a page_size of 128, change page_size to 128."),
}
DEEPSEEK_FAMILY = ("DeepseekV3ForCausalLM", "KimiK25ForConditionalGeneration", "MistralLarge3ForCausalLM",
                   "PixtralForConditionalGeneration")
DRAFT_MODEL_ALGORITHMS = ("EAGLE", "EAGLE3", "STANDALONE", "DFLASH", "DDTREE")


@dataclass
class ServerArgs:
    model_path: str
    tokenizer_path: Optional[str] = None
    trust_remote_code: bool = False
    context_length: Optional[int] = None
    host: str = "127.0.0.1"
    port: int = 30000
    skip_server_warmup: bool = False
    warmups: Optional[str] = None
    mem_fraction_static: Optional[float] = None
    max_running_requests: Optional[int] = None
    max_total_tokens: Optional[int] = None
    chunked_prefill_size: Optional[int] = None
    page_size: Optional[int] = None
    kv_cache_dtype: str = "auto"
    tp_size: int = 1
    ep_size: int = 1
    dp_size: int = 1
    enable_dp_attention: bool = False
    mm_enable_dp_encoder: bool = False
    nnodes: int = 1
    node_rank: int = 0
    dist_init_addr: Optional[str] = None
    dist_timeout: Optional[int] = None
    watchdog_timeout: float = 300
    log_level: str = "info"
    log_level_http: Optional[str] = None
    enable_metrics: bool = False
    api_key: Optional[str] = None
    served_model_name: Optional[str] = None
    reasoning_parser: Optional[str] = None
    tool_call_parser: Optional[str] = None
    attention_backend: Optional[str] = None
    mm_attention_backend: Optional[str] = None
    cuda_graph_max_bs: Optional[int] = None
    cuda_graph_bs: Optional[List[int]] = None
    disable_cuda_graph: bool = False
    disable_custom_all_reduce: bool = False
    enable_two_batch_overlap: bool = False
    disable_overlap_schedule: bool = False
    speculative_algorithm: Optional[str] = None
    speculative_draft_model_path: Optional[str] = None
    speculative_num_steps: Optional[int] = None
    speculative_eagle_topk: Optional[int] = None
    speculative_num_draft_tokens: Optional[int] = None
    speculative_dflash_block_size: Optional[int] = None
    speculative_ddtree_budget: Optional[int] = None
    speculative_draft_attention_backend: Optional[str] = None

    def __post_init__(self):
        # Same order as SGLang: model-specific defaults, then backend constraints, then
        # speculative decoding, so a backend-forced page size is what DDTREE sees.
        self.tokenizer_path = self.tokenizer_path or self.model_path
        self.served_model_name = self.served_model_name or self.model_path
        model_config = ModelConfig.from_path(self.model_path, self.context_length)
        self._handle_model_specific_adjustments(model_config)
        self._handle_attention_backend_compatibility()
        self._handle_speculative_decoding()
        if self.mem_fraction_static is None:
            self.mem_fraction_static = 0.83 if self.speculative_algorithm else 0.85

    def _handle_model_specific_adjustments(self, model_config: ModelConfig):
        # The stand-in plays a Blackwell (SM100) node: SGLang's DeepSeek-family handler (which
        # KimiK25ForConditionalGeneration maps to) defaults MLA models to trtllm_mla there.
        if self.attention_backend is None and model_config.architecture in DEEPSEEK_FAMILY:
            self.attention_backend = "trtllm_mla"
            logger.info("Use trtllm_mla as attention backend on sm100 for DeepseekV3ForCausalLM")
        weights = ((model_config.text_config.get("quantization_config") or {}).get("config_groups") or {}) \
            .get("group_0", {}).get("weights") or {}
        if model_config.architecture in DEEPSEEK_FAMILY and (weights.get("num_bits"), weights.get("group_size")) == (4, 32):
            logger.info("Use flashinfer_trtllm as MoE runner backend on Blackwell for Kimi K2 / K2.5 thinking int4")

    def _handle_attention_backend_compatibility(self):
        if self.attention_backend in FORCED_PAGE_SIZE:
            accepted, forced, warning = FORCED_PAGE_SIZE[self.attention_backend]
            if self.page_size not in accepted:
                logger.warning(warning.format(self.page_size))
                self.page_size = forced
        if self.attention_backend == "trtllm_mla" and self.kv_cache_dtype not in ("fp8_e4m3", "fp4_e2m1", "bf16", "auto"):
            raise ValueError("TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, fp4_e2m1, bf16, or auto.")
        if self.page_size is None:
            self.page_size = 1

    def _handle_speculative_decoding(self):
        algo = self.speculative_algorithm
        if algo is None:
            return
        if algo == "NEXTN":
            self.speculative_draft_model_path = self.speculative_draft_model_path or self.model_path
        if algo in DRAFT_MODEL_ALGORITHMS and not self.speculative_draft_model_path:
            raise ValueError(f"{algo} requires --speculative-draft-model-path to be set.")
        if self.max_running_requests is None:
            self.max_running_requests = 48
            logger.warning("Max running requests is reset to 48 for speculative decoding.")
        if algo not in ("DFLASH", "DDTREE"):
            return
        if algo == "DDTREE" and self.enable_dp_attention:
            raise ValueError("DDTREE does not support --enable-dp-attention.")
        # DFlash drafts one block per step; EAGLE-style step/top-k knobs do not apply.
        self.speculative_num_steps = 1
        self.speculative_eagle_topk = 1
        draft_config = get_hf_config(self.speculative_draft_model_path)
        block_size = (self.speculative_dflash_block_size or self.speculative_num_draft_tokens
                      or draft_config.get("block_size") or (draft_config.get("dflash_config") or {}).get("block_size"))
        if block_size is None:
            block_size = 16
            logger.warning("DFLASH draft config has no block_size; defaulting speculative_num_draft_tokens to 16.")
        if (algo == "DFLASH" and self.speculative_dflash_block_size and self.speculative_num_draft_tokens
                and self.speculative_dflash_block_size != self.speculative_num_draft_tokens):
            raise ValueError(
                "--speculative-dflash-block-size and --speculative-num-draft-tokens must match for DFLASH, got "
                f"{self.speculative_dflash_block_size} and {self.speculative_num_draft_tokens}."
            )
        self.speculative_dflash_block_size = int(block_size)
        self.speculative_num_draft_tokens = self.speculative_num_draft_tokens or int(block_size)
        if algo == "DDTREE":
            if self.page_size != 1:
                raise ValueError(f"DDTREE currently supports only page_size == 1. Got page_size={self.page_size}.")
            if self.speculative_ddtree_budget is None:
                self.speculative_ddtree_budget = self.speculative_dflash_block_size - 1
            # DDTree currently uses the non-overlap worker path.
            self.disable_overlap_schedule = True
            logger.warning("Overlap scheduler is disabled because of using DDTREE speculative decoding.")

    def check_server_args(self):
        assert self.tp_size % self.nnodes == 0, "tp_size must be divisible by number of nodes"
        assert self.nnodes == 1 or self.dist_init_addr, "please provide --dist-init-addr as host:port of head node"
        assert not self.enable_dp_attention or self.tp_size % self.dp_size == 0, "tp_size must be divisible by dp_size"
        # Accepted by --help, fatal at startup (SGLang's two-batch overlap needs the DeepEP
        # all-to-all backend, which this node does not have): the lab's bad flag for a canary.
        assert not self.enable_two_batch_overlap, \
            "Two-batch overlap requires --moe-a2a-backend deepep, which is not available on this node"

    def url(self) -> str:
        """Where this server reaches itself (the warmup request): wildcard binds mean loopback."""
        host = {"0.0.0.0": "127.0.0.1", "": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"http://[{host}]:{self.port}" if ":" in host else f"http://{host}:{self.port}"

    @staticmethod
    def add_cli_args(parser: argparse.ArgumentParser):
        add = parser.add_argument
        add("--model-path", "--model", type=str, required=True,
            help="The path of the model weights. This can be a local folder or a Hugging Face repo ID.")
        add("--tokenizer-path", type=str, help="The path of the tokenizer.")
        add("--trust-remote-code", action="store_true",
            help="Whether or not to allow for custom models defined on the Hub in their own modeling files.")
        add("--context-length", type=int, help="The model's maximum context length. Defaults to None "
            "(will use the value from the model's config.json instead).")
        add("--host", type=str, default=ServerArgs.host, help="The host of the HTTP server.")
        add("--port", type=int, default=ServerArgs.port, help="The port of the HTTP server.")
        add("--skip-server-warmup", action="store_true", help="If set, skip warmup.")
        add("--warmups", type=str, help="Specify custom warmup functions (csv) to run before server starts.")
        add("--mem-fraction-static", type=float, help="The fraction of the memory used for static allocation "
            "(model weights and KV cache memory pool). Use a smaller value if you see out-of-memory errors.")
        add("--max-running-requests", type=int, help="The maximum number of running requests.")
        add("--max-total-tokens", type=int, help="The maximum number of tokens in the memory pool.")
        add("--chunked-prefill-size", type=int, help="The maximum number of tokens in a chunk for the chunked prefill.")
        add("--page-size", type=int, help="The number of tokens in a page.")
        add("--kv-cache-dtype", type=str, default="auto", choices=KV_CACHE_DTYPE_CHOICES,
            help="Data type for kv cache storage.")
        add("--tensor-parallel-size", "--tp-size", type=int, default=1, help="The tensor parallelism size.")
        add("--expert-parallel-size", "--ep-size", "--ep", type=int, default=1,
            help="The expert parallelism size.")
        add("--data-parallel-size", "--dp-size", type=int, default=1, help="The data parallelism size.")
        add("--enable-dp-attention", action="store_true", help="Enabling data parallelism for attention and "
            "tensor parallelism for FFN.")
        add("--mm-enable-dp-encoder", action="store_true", help="Enabling data parallelism for mm encoder.")
        add("--nnodes", type=int, default=1, help="The number of nodes.")
        add("--node-rank", type=int, default=0, help="The node rank.")
        add("--dist-init-addr", "--nccl-init-addr", type=str,
            help="The host address for initializing distributed backend (e.g., `192.168.0.2:25000`).")
        add("--dist-timeout", type=int, help="Set timeout for torch.distributed initialization.")
        add("--watchdog-timeout", type=float, default=300, help="Set watchdog timeout in seconds. If a forward "
            "batch takes longer than this, the server will crash to prevent hanging.")
        add("--log-level", type=str, default="info", help="The logging level of all loggers.")
        add("--log-level-http", type=str, help="The logging level of HTTP server. If not set, reuse --log-level by default.")
        add("--enable-metrics", action="store_true", help="Enable log prometheus metrics.")
        add("--api-key", type=str, help="Set API key of the server. It is also used in the OpenAI API compatible server.")
        add("--served-model-name", type=str, help="Override the model name returned by the v1/models endpoint in OpenAI API server.")
        add("--reasoning-parser", type=str, choices=REASONING_PARSER_CHOICES, help="Specify the parser for reasoning models.")
        add("--tool-call-parser", type=str, choices=TOOL_CALL_PARSER_CHOICES, help="Specify the parser for handling tool-call interactions.")
        add("--attention-backend", type=str, choices=ATTENTION_BACKEND_CHOICES, help="Choose the kernels for attention layers.")
        add("--mm-attention-backend", type=str, choices=MM_ATTENTION_BACKEND_CHOICES, help="Set multimodal attention backend.")
        add("--cuda-graph-max-bs", type=int, help="Set the maximum batch size for cuda graph. It will extend the "
            "cuda graph capture batch size to this value.")
        add("--cuda-graph-bs", type=int, nargs="+", help="Set the list of batch sizes for cuda graph.")
        add("--disable-cuda-graph", action="store_true", help="Disable cuda graph.")
        add("--disable-custom-all-reduce", action="store_true", help="Disable the custom all-reduce kernel and fall back to NCCL.")
        add("--enable-two-batch-overlap", action="store_true", help="Enabling two micro batches to overlap.")
        add("--disable-overlap-schedule", action="store_true", help="Disable the overlap scheduler, which overlaps "
            "the CPU scheduler with GPU model worker.")
        add("--speculative-algorithm", type=str, choices=SPECULATIVE_ALGORITHM_CHOICES, help="Speculative algorithm.")
        add("--speculative-draft-model-path", "--speculative-draft-model", type=str,
            help="The path of the draft model weights. This can be a local folder or a Hugging Face repo ID.")
        add("--speculative-num-steps", type=int, help="The number of steps sampled from draft model in Speculative Decoding.")
        add("--speculative-eagle-topk", type=int, help="The number of tokens sampled from the draft model in eagle2 each step.")
        add("--speculative-num-draft-tokens", type=int, help="The number of tokens sampled from the draft model in Speculative Decoding.")
        add("--speculative-dflash-block-size", type=int, help="DFLASH only. Block size (verify window length). "
            "Alias of --speculative-num-draft-tokens for DFLASH.")
        add("--speculative-ddtree-budget", type=int, help="DDTREE only. Draft tree node budget per verify step "
            "(defaults to block_size - 1).")
        add("--speculative-draft-attention-backend", type=str, choices=ATTENTION_BACKEND_CHOICES,
            help="Attention backend for the speculative draft model.")

    @classmethod
    def from_cli_args(cls, args: argparse.Namespace) -> "ServerArgs":
        args.tp_size, args.ep_size = args.tensor_parallel_size, args.expert_parallel_size
        args.dp_size = args.data_parallel_size
        return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls)})


def prepare_server_args(argv: List[str]) -> ServerArgs:
    parser = argparse.ArgumentParser()
    ServerArgs.add_cli_args(parser)
    return ServerArgs.from_cli_args(parser.parse_args(argv))
