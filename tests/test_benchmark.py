"""`noderig bench`'s decisions without hosts: workloads, layouts and their deploy overrides,
the load generators' command lines, their real output read into records, the Pareto front,
the table and the plot."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from noderig import benchmark as bm

FIXTURES = Path(__file__).parent / "fixtures" / "bench"
INVENTORY = {"tp_size": 8, "ep_size": 1, "pp_size": 1, "speculative": "ddtree", "extra_flags": ["--log-level", "info"]}


def test_the_shipped_workloads_are_the_issue_s():
    workloads = bm.load_workloads()
    assert (workloads["chat"].input_len, workloads["chat"].output_len, workloads["chat"].concurrency) == (1024, 512, (1, 16, 64))
    assert (workloads["long-context"].input_len, workloads["long-context"].output_len) == (32768, 1024)
    assert workloads["long-context"].concurrency == (1, 16, 64)
    assert math.isinf(workloads["chat"].request_rate)
    # requests per run: max(min_requests=16, 4 x concurrency)
    assert [workloads["chat"].requests(c) for c in (1, 16, 64)] == [16, 64, 256]


def test_a_workload_file_adds_workloads_and_bad_values_get_one_sentence(tmp_path):
    extra = tmp_path / "w.toml"
    extra.write_text('[mine]\ninput_len = 10\noutput_len = 5\nconcurrency = [3]\nrequest_rate = 2.5\n')
    workloads = bm.load_workloads(extra)
    assert workloads["mine"].concurrency == (3,) and workloads["mine"].request_rate == 2.5 and "chat" in workloads
    extra.write_text('[bad]\ninput_len = 0\noutput_len = 5\nconcurrency = [3]\n')
    with pytest.raises(bm.BenchError, match=r"workload bad: input_len=0 must be a positive integer"):
        bm.load_workloads(extra)
    extra.write_text('[bad]\ninput_len = 1\noutput_len = 5\nconcurrency = [3]\nrate = 1\n')
    with pytest.raises(bm.BenchError, match=r"unknown key\(s\) rate"):
        bm.load_workloads(extra)
    with pytest.raises(bm.BenchError, match=r"unknown workload\(s\) nope; known: .*chat"):
        bm.select_workloads(bm.load_workloads(), ["nope"])


def test_layout_names_parse_into_settings_with_the_inventory_filling_gaps():
    assert bm.parse_layout("tp4-ep2").settings(INVENTORY) == {
        "tp_size": 4, "ep_size": 2, "pp_size": 1, "enable_dp_attention": False, "dp_size": 1,
        "speculative": "ddtree", "extra_flags": ["--log-level", "info"]}
    ep8 = bm.parse_layout("ep8").settings(INVENTORY)
    assert (ep8["tp_size"], ep8["ep_size"]) == (8, 8)  # EP within TP, as SGLang runs it
    dpa = bm.parse_layout("tp8-dpa-nospec").settings(INVENTORY)
    assert (dpa["enable_dp_attention"], dpa["dp_size"], dpa["speculative"]) == (True, 8, "none")
    assert dpa["extra_flags"] == ["--log-level", "info", "--dp-size", "8"]
    assert bm.parse_layout("tp8-ddtree+dflash").settings(INVENTORY)["speculative"] == "ddtree-dflash"


@pytest.mark.parametrize("text, message", [
    ("tp6-ep4", "tp 6 must be a multiple of ep 4"),
    ("tp8-xx2", "'xx2' is not tpN"),
    ("tp8-tp4", "sets tp twice"),
    ("tp0", "tp0 must be at least 1"),
    ("ep", "'ep' is not tpN"),
])
def test_bad_layout_names_are_refused_with_a_sentence(text, message):
    with pytest.raises(bm.BenchError, match=message.replace("(", r"\(")):
        bm.parse_layout(text)


def test_layouts_become_deploy_data_overrides():
    assert bm.parse_layout("tp4-ep2").data_overrides(INVENTORY) == [
        "tp_size=4", "ep_size=2", "pp_size=1", "enable_dp_attention=false", "speculative=ddtree"]
    # DP attention carries its dp size in extra_flags, replacing the inventory's own
    inv = {**INVENTORY, "enable_dp_attention": True, "extra_flags": ["--dp-size", "4", "--x"]}
    assert bm.parse_layout("tp8-dpa2").data_overrides(inv)[-1] == 'extra_flags=["--x", "--dp-size", "2"]'
    with pytest.raises(bm.BenchError, match="names a layout twice"):
        bm.parse_layouts("tp8,tp8")


def test_the_inventory_s_own_layout_is_named_like_a_command_line_one():
    assert bm.inventory_layout(INVENTORY).name == "tp8-ddtree"
    assert bm.inventory_layout({**INVENTORY, "ep_size": 2, "speculative": "none"}).name == "tp8-ep2-nospec"
    inv = {**INVENTORY, "enable_dp_attention": True, "extra_flags": ["--dp-size=4"], "speculative": "eagle3"}
    assert bm.inventory_layout(inv).name == "tp8-dpa4-eagle3"


def test_bench_serving_runs_the_workload_and_never_sees_the_key():
    chat = bm.load_workloads()["chat"]
    argv = bm.bench_serving_argv("/opt/sglang/venv/bin/python", base_url="http://127.0.0.1:30000", model="kimi-k2.6",
                                 tokenizer="/models/Kimi-K2.6", workload=chat, concurrency=16, output_file="/tmp/r")
    assert argv[:3] == ["/opt/sglang/venv/bin/python", "-m", "sglang.bench_serving"]
    pairs = {argv[i]: argv[i + 1] for i in range(3, len(argv) - 1)}
    assert pairs["--max-concurrency"] == "16" and pairs["--num-prompts"] == "64"
    assert pairs["--random-input-len"] == "1024" and pairs["--random-output-len"] == "512"
    assert pairs["--request-rate"] == "inf" and pairs["--random-range-ratio"] == "1.0"
    assert pairs["--output-file"] == "/tmp/r" and pairs["--backend"] == "sglang-oai-chat"
    assert not any("key" in a.lower() for a in argv)


def test_aiperf_gets_the_key_by_reference_to_its_environment():
    tiny = bm.workload_from_table("t", {"input_len": 32, "output_len": 12, "concurrency": [2], "min_requests": 4,
                                        "requests_per_level": 1})
    config = bm.aiperf_config(url="http://127.0.0.1:4000", model="kimi", tokenizer="/tok", workload=tiny,
                              concurrency=2, artifact_dir="/a", with_api_key=True)
    assert config["benchmark"]["endpoint"]["api_key"] == "${OPENAI_API_KEY}"
    assert config["benchmark"]["phases"] == {"type": "concurrency", "concurrency": 2, "requests": 4}
    assert config["benchmark"]["dataset"]["prompts"] == {"isl": 32, "osl": 12}
    assert config["benchmark"]["endpoint"]["use_server_token_count"] is True
    no_key = bm.aiperf_config(url="u", model="m", tokenizer="t", workload=tiny, concurrency=2, artifact_dir="/a",
                              with_api_key=False)
    assert "api_key" not in no_key["benchmark"]["endpoint"]
    assert bm.aiperf_argv("aiperf", "/r/aiperf.yaml") == ["aiperf", "profile", "--config", "/r/aiperf.yaml",
                                                           "--ui-type", "none"]


def test_a_real_aiperf_export_reads_into_metrics():
    export = json.loads((FIXTURES / "aiperf-0.13.0-chat-tp8.json").read_text())
    m = bm.parse_aiperf(export, requests=8)
    assert (m.completed, m.errors) == (8, 0)
    assert m.output_throughput == pytest.approx(305.68, abs=0.01)
    assert m.ttft_p50_ms == pytest.approx(38.30, abs=0.01) and m.ttft_p99_ms == pytest.approx(50.31, abs=0.01)
    # SGLang's ITL is aiperf's inter-chunk latency; SGLang's TPOT is aiperf's inter-token latency
    assert m.itl_p50_ms == pytest.approx(11.03, abs=0.01) and m.tpot_p50_ms == pytest.approx(10.10, abs=0.01)
    assert m.mean_output_len == 16.0 and m.error is None


def test_a_bench_serving_result_line_reads_into_metrics():
    text = (FIXTURES / "bench_serving-0.5-result.jsonl").read_text()
    m = bm.parse_bench_serving(text, requests=1000)
    assert (m.completed, m.errors) == (958, 42)
    assert m.output_throughput == 3492.1 and m.accept_length == 4.6
    assert (m.ttft_p50_ms, m.ttft_p99_ms, m.tpot_p50_ms, m.tpot_p99_ms) == (12900.7, 18800.3, 39.0, 44.8)
    assert (m.itl_p50_ms, m.itl_p99_ms) == (160.2, 301.5)
    assert m.mean_output_len == pytest.approx(1500.0, abs=0.1)
    assert bm.parse_bench_serving("", 5).error == "bench_serving wrote no result line"


def test_accept_length_and_gpus_come_from_the_server_and_nvidia_smi():
    assert bm.accept_length_from_server_info({"internal_states": [{"avg_spec_accept_length": 3.7}]}) == 3.7
    assert bm.accept_length_from_server_info({"decode": [{"internal_states": [{"avg_spec_accept_length": 5.5}]}]}) == 5.5
    assert bm.accept_length_from_server_info({"internal_states": [{"last_gen_throughput": 1.0}]}) is None
    assert bm.accept_length_from_server_info(None) is None
    smi = "NVIDIA B300 SXM6 AC, 10.3, 580.82.07\n" * 8
    assert bm.gpus_from_nvidia_smi(smi) == ("NVIDIA B300 SXM6 AC", 8)
    assert bm.gpus_from_nvidia_smi("") == (None, 0)


def _target(layout="tp8"):
    lay = bm.parse_layout(layout)
    return bm.Target(host="b300", gpu_model="NVIDIA B300", gpu_count=8, sglang_version="0.5.9", layout=lay,
                     settings=lay.settings(INVENTORY), speculative_draft="z-lab/Kimi-K2.6-DFlash")


def test_a_record_has_every_field_and_per_gpu_and_per_user_figures():
    chat = bm.load_workloads()["chat"]
    metrics = bm.Metrics(requests=64, completed=62, output_throughput=1600.0, tpot_p50_ms=40.0, ttft_p50_ms=900.0,
                         accept_length=4.2)
    record = bm.build_record(_target("tp4-ep2"), chat, 16, metrics, when="t", client="aiperf", ran_on="controller",
                             command="aiperf profile --config x")
    assert list(record) == list(bm.RECORD_FIELDS)
    assert record["tok_s_per_gpu"] == 400.0  # 1600 tok/s over TP 4 x PP 1 GPUs
    assert record["tok_s_per_user"] == 25.0  # 1000 / 40 ms
    assert (record["errors"], record["status"], record["tp"], record["ep"]) == (2, "errors", 4, 2)
    assert record["request_rate"] == "inf" and record["speculative"] == "ddtree"
    line = json.loads(bm.record_line(record))
    assert line["accept_length"] == 4.2 and line["command"] == "aiperf profile --config x"
    failed = bm.layout_failed_record(_target(), when="t", command="pyinfra ...", error="diagnosis: oom")
    assert list(failed) == list(bm.RECORD_FIELDS) and failed["status"] == "layout_failed"
    assert failed["output_tok_s"] is None and failed["error"] == "diagnosis: oom"


def test_the_pareto_front_keeps_what_nothing_beats_on_both_axes():
    points = [(10, 100), (20, 80), (15, 70), (5, 120), (20, 60), (5, 100)]
    # (15,70) is beaten by (20,80); (20,60) by (20,80); (5,100) by (10,100) and (5,120)
    assert bm.pareto_front(points) == [3, 0, 1]


def test_the_byte_tokenizer_has_one_token_per_byte():
    files = bm.byte_tokenizer_files()
    vocab = json.loads(files["tokenizer.json"])["model"]["vocab"]
    assert len(vocab) == 256 and sorted(vocab.values()) == list(range(256))
    assert "A" in vocab and "Ġ" in vocab  # a printable byte stands for itself; space is U+0120 in byte-level BPE
    assert json.loads(files["tokenizer_config.json"])["tokenizer_class"] == "PreTrainedTokenizerFast"


def test_the_table_and_the_plot_show_each_layout(tmp_path):
    from rich.console import Console

    from noderig.bench_report import print_table, write_plot

    chat = bm.load_workloads()["chat"]
    records = []
    for layout, out, tpot in (("tp8", 800.0, 20.0), ("tp4-ep2", 1200.0, 50.0)):
        for c in (1, 16):
            m = bm.Metrics(requests=16, completed=16, output_throughput=out * c / 8, tpot_p50_ms=tpot + c,
                           ttft_p50_ms=100.0)
            records.append(bm.build_record(_target(layout), chat, c, m, when="t", client="aiperf", ran_on="controller",
                                           command="x"))
    records.append(bm.layout_failed_record(_target("tp8-dpa-ddtree"), when="t", command="x", error="DDTREE does not support DP attention"))
    console = Console(record=True, width=200)
    print_table(records, console)
    text = console.export_text()
    assert "tp8" in text and "tp4-ep2" in text and "did not start" in text
    assert "DDTREE does not support DP attention" in text
    png = write_plot(records, tmp_path / "p.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert write_plot([records[-1]], tmp_path / "none.png") is None


def test_the_exit_status_says_a_layout_failed_or_the_restore_did_not_happen():
    measured, failed = {"status": "ok"}, {"status": "layout_failed"}
    assert bm.exit_status([measured, measured], restored=True, interrupted=False) == 0
    assert bm.exit_status([measured, failed], restored=True, interrupted=False) == 1
    assert bm.exit_status([measured, {"status": "failed"}], restored=True, interrupted=False) == 1
    assert bm.exit_status([{"status": "errors"}], restored=True, interrupted=False) == 0
    assert bm.exit_status([measured], restored=False, interrupted=False) == 1
    assert bm.exit_status([failed], restored=True, interrupted=True) == 130
    assert bm.exit_status([], restored=True, interrupted=False) == 0
