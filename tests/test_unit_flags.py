"""Unit flags and their systemd quoting: pure, no hosts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from noderig.errors import NoderigError
from noderig.unit import ServerSettings, exec_start, server_argv, systemd_quote


def settings_for(**kw) -> ServerSettings:
    base = dict(venv="/opt/sglang/venv", model_dir="/models/Kimi-K2.6", served_model_name="kimi-k2.6",
                draft_dir="/models/Kimi-K2.6-DFlash", attention_backend="flashinfer")
    return ServerSettings(**{**base, **kw})


def test_ddtree_pr_spelling_with_budget_and_page_size_one():
    argv = server_argv(settings_for(speculative="ddtree", ddtree_budget=32))
    joined = " ".join(argv)
    assert "--speculative-algorithm DDTREE --speculative-draft-model-path /models/Kimi-K2.6-DFlash" in joined
    assert "--speculative-ddtree-budget 32" in joined and "--page-size 1" in joined
    assert argv[-1] == "--skip-server-warmup"


def test_ddtree_fork_spelling_is_a_flag_on_dflash():
    joined = " ".join(server_argv(settings_for(speculative="ddtree-dflash")))
    assert "--speculative-algorithm DFLASH" in joined and "--speculative-dflash-enable-ddtree" in joined


@pytest.mark.parametrize("backend", [None, "trtllm_mla", "flashmla"])
def test_ddtree_refuses_attention_backends_that_force_larger_pages(backend):
    with pytest.raises(NoderigError, match="flashinfer or triton"):
        server_argv(settings_for(speculative="ddtree", attention_backend=backend))


def test_ddtree_refuses_a_page_size_other_than_one():
    with pytest.raises(NoderigError, match="page_size 1"):
        server_argv(settings_for(speculative="ddtree", page_size=16))


@pytest.mark.parametrize("field,value", [
    ("served_model_name", "kimi; rm -rf /"), ("model_dir", "relative/path"), ("port", 70000),
    ("tp_size", "8"), ("speculative", "medusa"), ("mem_fraction_static", 1.5),
    ("extra_flags", ["--x\nExecStartPre=/bin/evil"]),
])
def test_bad_inventory_values_get_one_clear_sentence(field, value):
    with pytest.raises(NoderigError, match=field.split("_")[0]):
        server_argv(settings_for(**{field: value}))


def unquote(word: str) -> str:
    if not word.startswith('"'):
        return word.replace("%%", "%").replace("$$", "$")
    body, out, i = word[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            out.append(body[i + 1])
            i += 2
        else:
            out.append(body[i])
            i += 1
    return "".join(out).replace("%%", "%").replace("$$", "$")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r\x00"), min_size=1))
def test_systemd_quoting_round_trips_any_argument(arg):
    quoted = systemd_quote(arg)
    assert unquote(quoted) == arg
    assert "\n" not in quoted
    if quoted.startswith('"'):
        inner = quoted[1:-1]
        # no unescaped quote can end the word early
        i = 0
        while i < len(inner):
            if inner[i] == "\\":
                i += 2
                continue
            assert inner[i] != '"'
            i += 1


def test_exec_start_rejects_line_breaks():
    with pytest.raises(NoderigError, match="line break"):
        exec_start(["/bin/x", "a\nb"])
