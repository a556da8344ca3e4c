"""The commonest startup failures, each in the words the tool that raises it prints (written from the sources as
remembered, not copied from a fixture), pasted as one bare line, keep their class; lines the servers print and go on
from stay healthy, alone and after a start (issue 13: a paste in words no fixture holds). A probe beside the
measure: docs/diagnose.md, "What a paste lacks"."""

from __future__ import annotations

import pytest

from noderig.diagnose import diagnose

COMMON_FAILURES = [
    ('unsupported_gpu_arch',
     'RuntimeError: CUDA error: no kernel image is available for execution on the device'),
    ('port_in_use',
     'OSError: [Errno 98] Address already in use'),
    ('nccl_failure',
     'RuntimeError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1970, unhandled '
     'cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.19.3'),
    ('toolkit_misconfigured',
     'ImportError: libcudart.so.12: cannot open shared object file: No such file or directory'),
    ('driver_mismatch',
     'RuntimeError: The NVIDIA driver on your system is too old (found version 11040). Please update '
     'your GPU driver by downloading and installing a new version from the URL: '
     'http://www.nvidia.com/Download/index.aspx'),
    ('hf_gated_repo',
     'huggingface_hub.errors.GatedRepoError: 401 Client Error. (Request ID: Root=1-66) Cannot access '
     'gated repo for url https://huggingface.co/meta-llama/Llama-3.1-8B/resolve/main/config.json.'),
    ('unsupported_architecture',
     'ValueError: The checkpoint you are trying to load has model type `qwen3_next` but Transformers '
     'does not recognize this architecture. This could be because of an issue with the checkpoint, or '
     'because your version of Transformers is out of date.'),
    ('checkpoint_corrupt',
     'safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer'),
    ('checkpoint_incomplete',
     'FileNotFoundError: [Errno 2] No such file or directory: '
     "'/models/x/model-00003-of-00004.safetensors'"),
    ('kv_cache_insufficient',
     "ValueError: The model's max seq len (131072) is larger than the maximum number of tokens that "
     'can be stored in KV cache (43264). Try increasing `gpu_memory_utilization` or decreasing '
     '`max_model_len` when initializing the engine.'),
    ('kv_cache_insufficient',
     'ValueError: No available memory for the cache blocks. Try increasing `gpu_memory_utilization` '
     'when initializing the engine.'),
    ('unsupported_gpu_arch',
     'RuntimeError: Triton Error [CUDA]: device kernel image is invalid'),
    ('triton_out_of_shared_memory',
     'triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: 135200, Hardware '
     'limit: 101376. Reducing block sizes or `num_stages` may help.'),
    ('too_many_open_files',
     'OSError: [Errno 24] Too many open files'),
    ('shm_too_small',
     'ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared '
     'memory (shm).'),
    ('missing_python_headers',
     '/tmp/x/main.c:5:10: fatal error: Python.h: No such file or directory'),
    ('missing_cuda_headers',
     '/x/csrc/a.cu:1:10: fatal error: cuda_runtime.h: No such file or directory'),
    ('nvcc_not_found',
     '/bin/sh: 1: nvcc: not found'),
    ('sgl_kernel_mismatch',
     'ImportError: /usr/local/lib/python3.12/dist-packages/sgl_kernel/common_ops.abi3.so: undefined '
     'symbol: _ZN3c104cuda9SetDeviceEi'),
    ('trust_remote_code',
     'ValueError: Loading /models/x requires you to execute the configuration file in that repo on '
     'your local machine. Make sure you have read the code there to avoid malicious use, then set the '
     'option `trust_remote_code=True` to remove this error.'),
    ('tokenizer_error',
     'Exception: data did not match any variant of untagged enum ModelWrapper at line 1251003 column 3'),
    ('unknown',
     'RuntimeError: Cannot re-initialize CUDA in forked subprocess. To use CUDA with multiprocessing, '
     "you must use the 'spawn' start method"),
    ('unsupported_gpu_arch',
     "ptxas fatal   : Value 'sm_120a' is not defined for option 'gpu-name'"),
    ('driver_mismatch',
     'RuntimeError: CUDA error: the provided PTX was compiled with an unsupported toolchain.'),
    ('driver_mismatch',
     'RuntimeError: Unexpected error from cudaGetDeviceCount(). Did you run some cuda functions before '
     'calling NumCudaDevices() that might have already set an error? Error 803: system has unsupported '
     'display driver / cuda driver combination'),
    ('tokenizer_error',
     'ValueError: Tokenizer class LlamaTokenizer does not exist or is not currently imported.'),
    ('driver_mismatch',
     'RuntimeError: Found no NVIDIA driver on your system. Please check that you have an NVIDIA GPU '
     'and installed a driver from http://www.nvidia.com/Download/index.aspx'),
    ('invalid_server_args',
     'launch_server.py: error: unrecognized arguments: --foo'),
    ('cuda_oom',
     'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a total '
     'capacity of 79.19 GiB of which 3.06 MiB is free.'),
    ('shm_too_small',
     'RuntimeError: DataLoader worker (pid 1234) is killed by signal: Bus error. It is possible that '
     "dataloader's workers are out of shared memory. Please try to raise your shared memory limit."),
    ('driver_mismatch',
     'RuntimeError: CUDA driver initialization failed, you might not have a CUDA gpu.'),
    ('nccl_failure',
     'torch.distributed.DistBackendError: NCCL error in: '
     '/pytorch/torch/csrc/distributed/c10d/NCCLUtils.hpp:268, unhandled system error (run with '
     'NCCL_DEBUG=INFO for details), NCCL version 2.21.5'),
    ('cuda_graph_capture',
     'RuntimeError: Capture cuda graph failed: CUDA error: operation not permitted when stream is '
     'capturing'),
    ('flash_attn_cute_missing',
     "ModuleNotFoundError: No module named 'flash_attn.cute'"),
    # no CUDA toolkit found at all: nvcc_not_found's fix (install the toolkit, set CUDA_HOME) is the remedy
    ('nvcc_not_found',
     'OSError: CUDA_HOME environment variable is not set. Please set it to your CUDA install root.'),
    ('cute_dsl_version_skew',
     "ImportError: cannot import name 'CompileOptions' from 'cutlass.cute'"),
    ('host_oom',
     'Killed'),
    ('speculative_config',
     'ValueError: Speculative decoding with draft models does not support multimodal models yet'),
    ('unsupported_gpu_arch',
     'ValueError: Bfloat16 is only supported on GPUs with compute capability of at least 8.0. Your '
     'Tesla T4 GPU has compute capability 7.5. You can use float16 instead by explicitly setting the '
     '`dtype` flag in CLI, for example: --dtype=half.'),
    ('unsupported_gpu_arch',
     'RuntimeError: FlashAttention only supports Ampere GPUs or newer.'),
    ('kernel_abi_mismatch',
     'ImportError: '
     '/usr/local/lib/python3.12/dist-packages/flash_attn_2_cuda.cpython-312-x86_64-linux-gnu.so: '
     'undefined symbol: '
     '_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE'),
    ('kernel_abi_mismatch',
     'ImportError: /usr/local/lib/python3.12/dist-packages/vllm/_C.abi3.so: undefined symbol: '
     '_ZN3c106detail14torchCheckFailEPKcS2_jRKSs'),
    ('unknown',
     'AssertionError: Torch not compiled with CUDA enabled'),
]

GOES_ON = [
    'WARNING 01-01 10:00:00 [config.py:123] Casting torch.bfloat16 to torch.float16.',
    '/usr/local/lib/python3.10/dist-packages/torch/_utils.py:831: UserWarning: TypedStorage is '
    'deprecated. It will be removed in the future and UntypedStorage will be the only storage class.',
    '/usr/local/lib/python3.10/dist-packages/huggingface_hub/file_download.py:1132: FutureWarning: '
    '`resume_download` is deprecated and will be removed in version 1.0.0. Downloads always resume '
    'when possible. If you want to force a new download, use `force_download=True`.',
    '[W socket.cpp:697] [c10d] The client socket has failed to connect to [localhost]:29500 (errno: '
    '99 - Cannot assign requested address).',
    'Special tokens have been added in the vocabulary, make sure the associated word embeddings are '
    'fine-tuned or trained.',
    '[rank0]:[W1101 10:00:00.123 ProcessGroupNCCL.cpp:4115] [PG ID 0 PG GUID 0 Rank 0]  using GPU 0 '
    'to perform barrier as devices used by this process are currently unknown. This can potentially '
    'cause a hang if this rank to GPU mapping is incorrect.',
    "WARNING 01-01 10:00:00 [custom_all_reduce.py:136] Custom allreduce is disabled because it's not "
    'supported on more than two PCIe-only GPUs. To silence this warning, specify '
    'disable_custom_all_reduce=True explicitly.',
    'You are using a model of type qwen2 to instantiate a model of type llama. This is not supported '
    'for all configurations of models and can yield errors.',
    'Sliding Window Attention is enabled but not implemented for `sdpa`; unexpected results may be '
    'encountered.',
    '`torch_dtype` is deprecated! Use `dtype` instead!',
    '/usr/lib/python3.10/multiprocessing/resource_tracker.py:224: UserWarning: resource_tracker: '
    'There appear to be 1 leaked semaphore objects to clean up at shutdown',
    '[W1208 10:00:00.000 socket.cpp:752] [c10d] The IPv6 network addresses of (myhost, 29500) cannot '
    'be retrieved (gai error: -3 - Temporary failure in name resolution).',
    '[2025-01-01 10:00:00 TP0] Ignore import error when loading sglang.srt.models.mllama4: No module '
    "named 'transformers.models.llama4'",
    'INFO 01-01 10:00:00 [gpu_model_runner.py:1234] Graph capturing finished in 10 secs, took 0.5 GiB',
    'WARNING 01-01 10:00:00 [utils.py:100] Found ulimit of 1024 and failed to automatically increase '
    'with error current limit exceeds maximum limit. This can cause fd limit errors like `OSError: '
    '[Errno 24] Too many open files`. Consider increasing with ulimit -n',
    '[2025-01-01 10:00:00] WARNING server_args.py:1000: Attention backend not explicitly specified. '
    'Use flashinfer backend by default.',
    'INFO 01-01 10:00:00 [importing.py:53] Triton module has been replaced with a placeholder.',
    'WARNING 01-01 10:00:00 [interface.py:100] Failed to import from vllm._C with '
    'ModuleNotFoundError("No module named \'vllm._C\'")',
    'Exception ignored in: <function BaseEventLoop.__del__ at 0x7f0000000000>',
    '[2025-01-01 10:00:00 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail '
    'mem=60.00 GB, mem usage=15.00 GB.',
    'INFO 01-01 10:00:00 [cuda.py:100] Using Flash Attention backend on V1 engine.',
    '[Gloo] Rank 0 is connected to 1 peer ranks. Expected number of connected peer ranks is : 1',
    'WARNING 01-01 10:00:00 [topk_topp_sampler.py:60] FlashInfer is not available. Falling back to '
    'the PyTorch-native implementation of top-p & top-k sampling. For the best performance, please '
    'install FlashInfer.',
    '2025-01-01 10:00:00,000 - INFO - flashinfer.jit: Prebuilt kernels not found, using JIT backend',
    'W0101 10:00:00.000000 1 torch/distributed/run.py:792] Setting OMP_NUM_THREADS environment '
    'variable for each process to be 1 in default, to avoid your system being overloaded, please '
    'further tune the variable for optimal performance in your application as needed.',
]
_STARTING = ["INFO 01-01 09:59:00 [api_server.py:1] vLLM API server version 0.9.2",
             "INFO 01-01 09:59:01 [config.py:1] Using max model len 4096"]


@pytest.mark.parametrize("cls, line", COMMON_FAILURES)
def test_a_common_failure_pasted_alone_keeps_its_class(cls, line):
    assert diagnose(line).cls == cls


@pytest.mark.parametrize("line", GOES_ON)
def test_a_line_the_server_goes_on_from_stays_healthy(line):
    assert diagnose(line).cls == "healthy"
    assert diagnose("\n".join([*_STARTING, line])).cls == "healthy"
