"""Crash diagnosis of a traceback IPython printed (a notebook, Colab, an IPython shell): tracebacks.py.

IPython's ultratb names the exception in the header, prints a frame as "File <path>:<line>, in <qualified name>(...)"
(IPython 8) or "<path> in <name>(...)" (IPython 7, Colab), a notebook cell as "Cell In[3], line 3", and the source
numbered under each frame, the line that ran behind an arrow. vLLM's offline `LLM(...)` is often first run there.
The messages are vLLM's own (tests/fixtures/crashlogs/)."""

from __future__ import annotations

from noderig.diagnose import diagnose, normalize, parse_tracebacks

KV = ("ValueError: The model's max seq len (32768) is larger than the maximum number of tokens that can be stored in "
      "KV cache (7344). Try increasing `gpu_memory_utilization` or decreasing `max_model_len` when initializing the "
      "engine.")
SITE = "~/miniconda3/envs/vllm/lib/python3.10/site-packages/vllm"
IPYTHON8 = [
    "---------------------------------------------------------------------------",
    "ValueError                                Traceback (most recent call last)",
    "Cell In[3], line 3",
    "      1 from vllm import LLM",
    '----> 3 llm = LLM(model="Qwen/Qwen2.5-7B-Instruct", max_model_len=32768)',
    "",
    f"File {SITE}/entrypoints/llm.py:177, in LLM.__init__(self, model, tokenizer, **kwargs)",
    "    175 engine_args = EngineArgs(model=model, **kwargs)",
    "   (...)",
    "--> 177 self.llm_engine = LLMEngine.from_engine_args(",
    "    178     engine_args, usage_context=UsageContext.LLM_CLASS)",
    "",
    f"File {SITE}/core/kv_cache_utils.py:700, in check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)",
    "    699 if max_model_len > estimated_max_len:",
    "--> 700     raise ValueError(",
    "",
    KV,
]


def test_ipython_8_traceback_is_read_with_its_frames():
    lines = normalize("\n".join(IPYTHON8))
    (tb,) = parse_tracebacks(lines)
    assert [f.function for f in tb.final.frames] == ["<module>", "__init__", "check_enough_kv_cache_memory"]
    assert tb.final.exc_type == "ValueError" and tb.final.exc_index == len(IPYTHON8) - 1
    d = diagnose("\n".join(IPYTHON8))
    assert d.cls == "kv_cache_insufficient"
    assert d.chain == ["llm.__init__", "kv_cache_utils.check_enough_kv_cache_memory"]
    # the numbered source is the frames' echo, never evidence
    assert all(not e.line.startswith(("-->", "175", "(...)")) for e in d.evidence)


def test_ipython_7_traceback_as_colab_prints_it():
    ipython7 = [
        "ValueError                                Traceback (most recent call last)",
        "<ipython-input-2-7f3b1a2c9d01> in <module>()",
        "----> 1 llm = LLM(model='Qwen/Qwen2.5-7B-Instruct', max_model_len=32768)",
        "",
        f"{SITE}/entrypoints/llm.py in __init__(self, model, tokenizer, **kwargs)",
        "    175         engine_args = EngineArgs(model=model, **kwargs)",
        "--> 177         self.llm_engine = LLMEngine.from_engine_args(",
        "",
        f"{SITE}/core/kv_cache_utils.py in check_enough_kv_cache_memory(vllm_config, kv_cache_spec, available_memory)",
        "--> 700         raise ValueError(",
        "",
        KV,
    ]
    (tb,) = parse_tracebacks(normalize("\n".join(ipython7)))
    assert [f.function for f in tb.final.frames] == ["<module>", "__init__", "check_enough_kv_cache_memory"]
    assert diagnose("\n".join(ipython7)).cls == "kv_cache_insufficient"


def test_a_cut_ipython_traceback_is_still_a_traceback_with_its_cause_from_the_raise():
    # cut after the raise: the statement that ran stands for the exception (as in Python's own form)
    cut = IPYTHON8[:-2]
    (tb,) = parse_tracebacks(normalize("\n".join(cut)))
    assert tb.final.exc_type == "ValueError" and tb.final.exc_index == len(cut) - 1
    assert diagnose("\n".join(cut)).cls != "healthy"


def test_a_bare_assert_behind_ipython_s_arrow_is_its_message():
    lines = ["AssertionError                            Traceback (most recent call last)",
             f"File {SITE}/worker/worker.py:118, in init_device(self)",
             "--> 118 assert cuda_home is not None", "", "AssertionError"]
    (tb,) = parse_tracebacks(normalize("\n".join(lines)))
    assert tb.final.message == "cuda_home is not None"


def test_a_line_after_an_ipython_frame_is_no_echo_unless_numbered():
    # a frame pasted alone, then the issue's own words: the words are read (evidence), not hidden as source
    pasted = [f"File {SITE}/config.py:200, in ModelConfig.__init__(self, model, tokenizer)",
              "Model architectures ['LlavaNextForConditionalGeneration'] are not supported for now"]
    d = diagnose("\n".join(pasted))
    assert d.cls == "unsupported_architecture"
    # and in Python's own traceback, a numbered line after the frames is no IPython source
    python = ["Traceback (most recent call last):", '  File "/x/vllm/config.py", line 200, in __init__',
              "    self._verify()", "12 GPUs found", KV]
    (tb,) = parse_tracebacks(normalize("\n".join(python)))
    assert tb.final.exc_type is None
