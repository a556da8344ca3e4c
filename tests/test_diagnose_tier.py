"""Words of the key-token tier (noderig/diagnose/tokens.toml) chosen by the leave-one-out measure (scripts/diagnose_loo.py:
each tuning log diagnosed with the catalog lines written for it left out), so that a failure in new words still lands
in its class (issue 13). Each case is what the tier alone names for a paste, as if no signature matched it; the traps
are what the new words must not take."""

from __future__ import annotations

import pytest

from tests.test_diagnose import _tier_names


@pytest.mark.parametrize("lines, named", [
    # a binary built against another version than the one loaded: numpy's C API, cuDNN, a torch operator a wheel for
    # another torch registered
    (["ImportError: A module that was compiled using NumPy 1.x cannot be run in NumPy 2.1.3 as it may crash."],
     "kernel_abi_mismatch"),
    (["RuntimeError: cuDNN version incompatibility: PyTorch was compiled  against (9, 1, 0) but found runtime "
      "version (8, 9, 7)."], "kernel_abi_mismatch"),
    (["RuntimeError: operator flash_attn::fwd does not exist"], None),  # the operator alone: one word, no class
    # trap: the toolkit's own check that the CUDA it compiles with is not torch's stays the toolkit's
    (["RuntimeError: The detected CUDA version (12.1) mismatches the version that was used to compile PyTorch (11.8). "
      "Please make sure to use the same CUDA versions."], "toolkit_misconfigured"),
])
def test_a_binary_built_against_another_version_is_the_abis(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # a value the user gave, refused in words that name the argument or its place
    (["ValueError: Quantization method specified in the model config (awq) does not match the quantization method "
      "specified in the `quantization` argument (gptq)."], "invalid_server_args"),
    (["ValueError: torch.bfloat16 is not supported for quantization method gptq. Supported dtypes: [torch.float16]. "
      "Pass --dtype float16 on the command line as the user-specified value."], "invalid_server_args"),
    # trap: a memory shortfall that names the flag to raise stays the KV cache's
    (["RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."], "kv_cache_insufficient"),
])
def test_a_value_the_user_specified_refused_is_the_arguments(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # HIP's name for a kernel built without this GPU's arch, as CUDA's
    (["RuntimeError: HIP error: invalid device function"], "unsupported_gpu_arch"),
    (["RuntimeError: CUDA error: invalid device function"], "unsupported_gpu_arch"),
    # the capture's API by name: torch's graph capture used outside it, SGLang's batch sizes to capture left empty
    (["RuntimeError: get_currently_capturing_graph() can be used only between capture_begin() and capture_end(). Did "
      "you use a stream without making it depend upon the original stream used for capture?"], "cuda_graph_capture"),
    (["AssertionError: capture_bs=[]"], None),  # one word only: the tier names nothing
    # a chat template Jinja cannot parse
    (["jinja2.exceptions.TemplateSyntaxError: Encountered unknown tag 'generation'."], "tokenizer_error"),
    (["jinja2.exceptions.UndefinedError: 'messages' is undefined"], "tokenizer_error"),
    # trap: a device that is invalid for another reason is no arch
    (["RuntimeError: CUDA error: invalid device ordinal"], None),
])
def test_an_arch_a_capture_or_a_template_named_by_their_own_words(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # a repository that has no tokenizer is a tokenizer not there
    (["thread 'main' panicked at 'called `Result::unwrap()` on an `Err` value: \"Model org/m on the Hub doesn't have a "
      "tokenizer\"', router/src/main.rs:101:70"], "tokenizer_error"),
    # a hybrid model's Mamba state cache with no room is the KV cache's
    (["AssertionError: Not enough space for mamba cache, try to increase --max-mamba-cache-size."],
     "kv_cache_insufficient"),
    # CUDA's stub driver library: no driver behind it
    (["RuntimeError: CUDA error code=34(b'CUDA_ERROR_STUB_LIBRARY')"], "driver_mismatch"),
    # trap: a repository that has no chat template is no tokenizer missing ("have a" names the tokenizer itself)
    (["ValueError: Model org/m doesn't have a chat template"], None),
])
def test_a_tokenizer_a_state_cache_or_a_driver_not_there(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # an SM number written with a space, as a release's own check words it (MinerU's SGLang: "only supports sm 75 and
    # above"): the same token as sm_75 and sm75
    (["RuntimeError: FlashMLA only supports sm 90 and sm 100."], "unsupported_gpu_arch"),
    (["ValueError: This build only supports SM 80 or newer GPUs."], "unsupported_gpu_arch"),
    # trap: a number after the word in other senses is no SM ("sm" as a size, a unit count with no refusal)
    (["RuntimeError: Expected 2 sm 3 got 4"], None),
])
def test_an_sm_number_with_a_space_is_an_sm(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # a config check comparing two settings by their values: the settings given do not fit each other, in whatever
    # words the check uses (vLLM's scheduler and encoder-budget checks, another release's wording)
    (["ValueError: long_prefill_token_threshold (9000) cannot be greater than the max_model_len (8192)."],
     "invalid_server_args"),
    (["ValueError: Chunked MM input disabled but max_tokens_per_mm_item (2496) is larger than max_num_batched_tokens "
      "(2048). Please increase max_num_batched_tokens."], "invalid_server_args"),
    (["ValueError: max_num_seqs (512) must be less than or equal to max_num_batched_tokens (256)."],
     "invalid_server_args"),
    # trap: a setting compared with what the KV cache holds is the memory's shortfall, not two settings
    (["ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
      "KV cache (4096). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
      "engine."], "kv_cache_insufficient"),
    # trap: one setting with its value and no second one names nothing
    (["ValueError: max_num_seqs (512) is larger than expected"], None),
])
def test_two_settings_compared_by_their_values_are_the_arguments(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # pickle's refusal of a file whose first byte is no pickle: a Git LFS pointer ('v') or an HTML page ('<') saved
    # where the weights should be
    (["_pickle.UnpicklingError: invalid load key, 'v'."], "checkpoint_corrupt"),
    (["_pickle.UnpicklingError: invalid load key, '<'."], "checkpoint_corrupt"),
    # trap: torch's weights-only refusal of a file that is fine is no corrupt file
    (["_pickle.UnpicklingError: Weights only load failed. This file can still be loaded, to do so you have two "
      "options, do those steps only if you trust the source of the checkpoint."], None),
])
def test_a_file_pickle_cannot_start_reading_is_corrupt(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # the host compiler the CUDA toolkit refuses, in nvcc's words and in torch's cpp_extension's
    (["RuntimeError: The current installed version of g++ (14.2.0) is greater than the maximum required version by "
      "CUDA 12.4. Please make sure to use an adequate version of g++ (>=6.0.0, <14.0)."], "toolkit_misconfigured"),
    (["/usr/local/cuda/include/crt/host_config.h:143:2: error: #error -- unsupported GNU version! gcc versions later "
      "than 13 are not supported!"], "toolkit_misconfigured"),
    # trap: a compiler that failed for another reason names no toolkit
    (["error: command '/usr/bin/gcc' failed with exit code 1"], None),
])
def test_a_host_compiler_the_toolkit_refuses_is_the_toolkits(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # an extension built against another NumPy ABI, in NumPy's own words
    (["ImportError: numpy.core.multiarray failed to import"], "kernel_abi_mismatch"),
    (["AttributeError: _ARRAY_API not found"], "kernel_abi_mismatch"),
    (["ValueError: numpy.dtype size changed, may indicate binary incompatibility. Expected 96 from C header, got 88 "
      "from PyObject"], "kernel_abi_mismatch"),
    # trap: NumPy missing is no ABI
    (["ModuleNotFoundError: No module named 'numpy'"], None),
])
def test_numpys_words_for_another_abi_are_the_abis(lines, named):
    assert _tier_names(*lines) == named


@pytest.mark.parametrize("lines, named", [
    # a value refused with the values the program accepts listed after it, by a parser of the program's own (a
    # registry of tool or reasoning parsers) rather than argparse's "invalid choice"
    (["KeyError: 'invalid reasoning parser: qwen4 (chose from { deepseek_r1, qwen3, glm45 })'"], "invalid_server_args"),
    (["ValueError: Unknown attention backend 'fa5'; choose from ['flashinfer', 'triton', 'fa3']"],
     "invalid_server_args"),
    # trap: a list of what a model may be is the architecture's words, not a choice refused
    (["ValueError: Unrecognized model in /models/x. Should have a `model_type` key in its config.json, or contain one "
      "of the following strings in its name: albert, bart"], "unsupported_architecture"),
])
def test_a_value_refused_with_the_choices_listed_is_the_arguments(lines, named):
    assert _tier_names(*lines) == named
