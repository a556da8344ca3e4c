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
