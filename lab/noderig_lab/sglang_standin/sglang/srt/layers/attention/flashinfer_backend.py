"""FlashInfer's MLA attention backend, with its JIT: on first use FlashInfer compiles its kernels
for this GPU with the CUDA toolkit's nvcc. The stand-in plays a B300 (sm_103a), which nvcc
knows from CUDA 12.9 on: with an older toolkit the build fails with nvcc's own message, as on a
node whose CUDA toolkit predates its GPU. Triton's backend brings its own ptxas and is spared.
"""

import logging
import os

logger = logging.getLogger(__name__)

GPU_ARCH = "103a"
FIRST_TOOLKIT = (12, 9)  # the first nvcc that knows compute_103a
JIT_OPS = ("batch_mla_attention_dtype_q_bf16_dtype_kv_bf16_dtype_o_bf16_dtype_idx_i32_head_dim_ckv_512_head_dim_kpe_64",)


def toolkit_version() -> tuple:
    """What `nvcc --version` reports on the node. The lab has no CUDA toolkit: the test hook
    SGLANG_STANDIN_NVCC_VERSION plays one (default 12.9, new enough)."""
    text = os.environ.get("SGLANG_STANDIN_NVCC_VERSION", "12.9")
    try:
        return tuple(int(part) for part in text.split(".")[:2])
    except ValueError:
        return FIRST_TOOLKIT


def _ninja_failure(op: str) -> str:
    cuda_home = os.environ.get("CUDA_HOME", "/usr/local/cuda")
    obj = f"{op}/batch_mla_run.cuda.o"
    return (
        "Ninja build failed. Ninja output:\n"
        f"[1/3] {cuda_home}/bin/nvcc --generate-dependencies-with-compile --dependency-output {obj}.d "
        f"-DTORCH_EXTENSION_NAME={op} -O3 -std=c++17 --threads=4 -use_fast_math "
        f"-gencode=arch=compute_{GPU_ARCH},code=sm_{GPU_ARCH} -c batch_mla_run.cu -o {obj}\n"
        f"FAILED: {obj}\n"
        f"nvcc fatal   : Unsupported gpu architecture 'compute_{GPU_ARCH}'\n"
        "ninja: build stopped: subcommand failed.\n"
    )


def build_jit_op(op: str) -> None:
    logger.info(f"Loading JIT ops: {op}")
    if toolkit_version() < FIRST_TOOLKIT:
        raise RuntimeError(_ninja_failure(op))
    logger.info(f"Finished loading JIT ops: {op}")


class FlashInferMLAAttnBackend:
    def __init__(self, model_runner):
        self.device = f"cuda:{model_runner.gpu_id}"
        for op in JIT_OPS:
            build_jit_op(op)
