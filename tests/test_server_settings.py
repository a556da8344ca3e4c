"""Each inventory setting's own rule, at its edges, with the exact sentence a user reads.

The ranges and sentences below are the contract (README, inventory reference), written out
here rather than read from ``noderig.server_settings``: a changed bound or a changed sentence
fails a test. Cross-field rules (DDTree, multi-node) are tested in test_unit_flags.py."""

from __future__ import annotations

import math
from dataclasses import replace

import pytest

from noderig.errors import NoderigError
from noderig.server_settings import (ServerSettings, env_file_problems, path_problems, raise_problems,
                                     validate)

# speculative=none: no draft model needed, so a good baseline has no problem at all.
BASE = {"venv_path": "/opt/sglang-venv", "model_dir": "/models/kimi-k2", "served_model_name": "kimi-k2",
        "speculative": "none"}


def settings(**fields) -> ServerSettings:
    """BASE with dataclass fields replaced (None included, which the inventory cannot express)."""
    return replace(ServerSettings.from_inventory(BASE), **fields)


def own_problems(key: str, **fields) -> list[str]:
    """The problems about inventory key ``key`` alone (not the cross-field rules)."""
    return [p for p in validate(settings(**fields)) if p.startswith(f"inventory value {key}=")]


def test_the_baseline_has_no_problem():
    assert validate(settings()) == []


# (inventory key, field, low, high, optional)
INTEGERS = [
    ("server_port", "port", 1, 65535, False),
    ("pp_size", "pp_size", 1, 64, False),
    ("context_length", "context_length", 1, 1 << 24, True),
    ("ddtree_budget", "ddtree_budget", 1, 4096, True),
    ("speculative_num_steps", "speculative_num_steps", 1, 64, True),
    ("speculative_eagle_topk", "speculative_eagle_topk", 1, 64, True),
    ("speculative_num_draft_tokens", "speculative_num_draft_tokens", 1, 4096, True),
    ("page_size", "page_size", 1, 1024, True),
    ("cuda_graph_max_bs", "cuda_graph_max_bs", 1, 4096, True),
    ("nnodes", "nnodes", 1, 64, False),
    ("node_rank", "node_rank", 0, 63, False),
    ("start_timeout", "start_timeout", 1, 86400, False),
    ("stop_timeout", "stop_timeout", 1, 3600, False),
    ("restart_sec", "restart_sec", 0, 3600, False),
    ("start_limit_burst", "start_limit_burst", 1, 100, False),
]


@pytest.mark.parametrize("key,name,low,high,optional", INTEGERS, ids=[row[0] for row in INTEGERS])
def test_an_integer_setting_takes_its_range_and_nothing_else(key, name, low, high, optional):
    for good in (low, high):
        assert own_problems(key, **{name: good}) == [], good
    for bad in (low - 1, high + 1, True, "8", 2.0):
        assert own_problems(key, **{name: bad}) == [f"inventory value {key}={bad!r} must be an integer from "
                                                    f"{low} to {high}"], bad
    unset = own_problems(key, **{name: None})
    assert unset == ([] if optional else [f"inventory value {key}=None must be an integer from {low} to {high}"])


@pytest.mark.parametrize("key", ["tp_size", "ep_size"])
def test_a_parallel_size_is_a_power_of_two_up_to_64(key):
    for good in (1, 2, 8, 64):
        assert own_problems(key, **{key: good}) == [], good
    for bad in (0, 3, 6, 128, -8, True, "8"):
        assert own_problems(key, **{key: bad}) == [f"inventory value {key}={bad!r} must be a power of two from 1 "
                                                   "to 64"], bad


BOOLEANS = ["trust_remote_code", "skip_server_warmup", "enable_dp_attention", "disable_cuda_graph",
            "speculative_use_rejection_sampling"]


@pytest.mark.parametrize("key", BOOLEANS + ["disable_overlap_schedule"])
def test_a_switch_is_true_or_false(key):
    for good in (True, False):
        assert own_problems(key, **{key: good}) == [], good
    for bad in ("yes", 1, 0):
        assert own_problems(key, **{key: bad}) == [f"inventory value {key}={bad!r} must be true or false"], bad
    # Only disable_overlap_schedule may be left unset (None: on for DDTree, SGLang's default otherwise).
    unset = own_problems(key, **{key: None})
    assert unset == ([] if key == "disable_overlap_schedule" else [f"inventory value {key}=None must be true or false"])


# (key, longest allowed, optional)
TOKENS = [("served_model_name", 256, False), ("reasoning_parser", 64, True), ("tool_call_parser", 64, True),
          ("attention_backend", 64, True), ("mm_attention_backend", 64, True),
          ("draft_attention_backend", 64, True), ("service_name", 200, False)]


@pytest.mark.parametrize("key,longest,optional", TOKENS, ids=[row[0] for row in TOKENS])
def test_a_word_setting_is_plain_characters_of_bounded_length(key, longest, optional):
    not_allowed = f"is not allowed: use at most {longest} letters, digits and ._/:@+=,- only"
    assert own_problems(key, **{key: "a" * longest}) == []
    assert own_problems(key, **{key: "a-b_c.d"}) == []
    assert own_problems(key, **{key: "a" * (longest + 1)}) == [f"inventory value {key}={'a' * (longest + 1)!r} "
                                                               f"{not_allowed}"]
    for bad in ("a b", "a;b", "a\nb", "é"):
        assert own_problems(key, **{key: bad}) == [f"inventory value {key}={bad!r} {not_allowed}"], bad
    for bad in ("", 7):
        assert own_problems(key, **{key: bad}) == [f"inventory value {key}={bad!r} must be a non-empty string"], bad
    unset = own_problems(key, **{key: None})
    assert unset == ([] if optional else [f"inventory value {key}=None must be a non-empty string"])


def test_a_service_name_is_also_a_unit_name():
    # ':' '@' '+' '=' ',' '/' pass as words for a shell, not in a unit's name
    for bad in ("sg:lang", "sglang@1", "a/b"):
        assert own_problems("service_name", service_name=bad) == [
            f"inventory value service_name={bad!r} must be a unit name of letters, digits and ._- only"], bad


# (key, field, optional)
PATHS = [("venv_path", "venv", False), ("model_dir", "model_dir", False), ("draft_dir", "draft_dir", True)]
NOT_NORMAL = ["/a//b", "/a/./b", "/a/../b", "/a/..", "/a/.", "/a/b/"[:-1] + "//"]


@pytest.mark.parametrize("key,name,optional", PATHS, ids=[row[0] for row in PATHS])
def test_a_path_setting_is_a_plain_normalised_absolute_path(key, name, optional):
    for good in ("/a", "/opt/a.b/c-d_e", "/" + "a" * 1023, "/a/..b", "/a/.b"):
        assert own_problems(key, **{name: good}) == [], good
    for bad in ("relative/path", "~/x", 5):
        assert own_problems(key, **{name: bad}) == [f"inventory value {key}={bad!r} must be an absolute path"], bad
    for bad in ("/a b", "/a'b", "/a$b", "/" + "a" * 1024):
        assert own_problems(key, **{name: bad}) == [f"inventory value {key}={bad!r} is not allowed: a path of "
                                                    "letters, digits and ._/:@+=,- only (no spaces or quotes)"], bad
    for bad in NOT_NORMAL:
        assert own_problems(key, **{name: bad}) == [f"inventory value {key}={bad!r} must be a normalized absolute "
                                                    "path (no //, /./ or /../)"], bad
    unset = own_problems(key, **{name: None})
    assert unset == ([] if optional else [f"inventory value {key}=None must be an absolute path"])


ENV_FILE_RULE = ("must be a file in noderig's own directory /etc/noderig named <name>.env (it is replaced by "
                 "the server's environment and secrets, mode 0600), e.g. /etc/noderig/sglang.env")


def test_the_environment_file_is_a_file_of_noderigs_own_directory():
    # the service step replaces this file (mode 0600): env_file='/etc/passwd' replaced the passwd file
    for good in (None, "/etc/noderig/sglang.env", "/etc/noderig/sglang-b.env"):
        assert own_problems("env_file", env_file=good) == [], good
    for bad in ("/etc/passwd", "/etc/sudoers.d/x.env", "/etc/noderig/repairs.json", "/etc/noderig/firewall.nft",
                "/etc/noderig/.env", "/etc/noderig/x/y.env", "/root/.ssh/authorized_keys", "/opt/x.env"):
        assert own_problems("env_file", env_file=bad) == [f"inventory value env_file={bad!r} {ENV_FILE_RULE}"], bad
    assert own_problems("env_file", env_file="/etc/noderig/../passwd.env") == [
        "inventory value env_file='/etc/noderig/../passwd.env' must be a normalized absolute path (no //, /./ or /../)"]


def test_one_path_setting_is_checked_alone():
    assert path_problems(settings(venv="/opt/v"), "venv") == []
    assert path_problems(settings(model_dir="/m/../etc"), "model_dir") == [
        "inventory value model_dir='/m/../etc' must be a normalized absolute path (no //, /./ or /../)"]


def test_the_listen_host_is_an_address_or_a_host_name():
    for good in ("0.0.0.0", "::1", "10.1.2.3", "node-1.cluster.example"):
        assert own_problems("server_host", host=good) == [], good
    for bad in ("bad host", "-lead", "a_b", ""):
        assert own_problems("server_host", host=bad) == [f"inventory value server_host={bad!r} must be an IP address "
                                                         "or a host name"], bad


def test_the_memory_fraction_is_strictly_between_0_and_1_or_unset():
    for good in (None, 0.5, 0.001, 0.99):
        assert own_problems("mem_fraction_static", mem_fraction_static=good) == [], good
    for bad in (0, 1, 1.0, 0.0, -0.5, True, False, "0.5", math.nan, math.inf):
        assert own_problems("mem_fraction_static", mem_fraction_static=bad) == [
            f"inventory value mem_fraction_static={bad!r} must be a number between 0 and 1 (exclusive), or unset"], bad


def test_the_speculative_mode_is_one_of_five():
    assert own_problems("speculative", speculative="medusa") == [
        "inventory value speculative='medusa' must be one of none, ddtree, ddtree-dflash, dflash, eagle3"]


@pytest.mark.parametrize("value,rule", [
    ("10.0.0.2:25000", None), ("[::1]:25000", None), ("[FE80::1]:25000", None), ("head-0.cluster:1", None),
    ("h:65535", None),
    ("10.0.0.2", "must be host:port of the head node (e.g. 10.0.0.2:25000)"),
    (25000, "must be host:port of the head node (e.g. 10.0.0.2:25000)"),
    ("::1:25000", "must be host:port of the head node (e.g. 10.0.0.2:25000)"),
    ("h:123456", "must be host:port of the head node (e.g. 10.0.0.2:25000)"),
    ("[1:2:3]:25000", "has an invalid IPv6 address in brackets"),
    ("[::1:25000", "must be host:port of the head node (e.g. 10.0.0.2:25000)"),
    ("bad_host:25000", "must be host:port with an IP address or a host name before the colon"),
    ("h:0", "has a port outside 1-65535"), ("h:65536", "has a port outside 1-65535"),
    ("[::1]:0", "has a port outside 1-65535"),
])
def test_the_head_node_address_is_host_colon_port(value, rule):
    expected = [] if rule is None else [f"inventory value dist_init_addr={value!r} {rule}"]
    assert own_problems("dist_init_addr", dist_init_addr=value) == expected


def test_the_sglang_version_is_a_known_version_string_or_unset():
    assert own_problems("sglang_version", sglang_version=None) == []
    assert own_problems("sglang_version", sglang_version=5) == [
        "inventory value sglang_version=5 must be a version string like 0.5.9, or unset"]
    [problem] = own_problems("sglang_version", sglang_version="0.1.0")
    assert problem.startswith("inventory value sglang_version='0.1.0' is not usable: ")


@pytest.mark.parametrize("flag,setting", [("--model-path=/m", "model_dir"), ("--tp-size", "tp_size"),
                                          ("--speculative-algorithm=EAGLE", "speculative"),
                                          ("--port", "server_port")])
def test_an_extra_flag_that_a_setting_renders_names_that_setting(flag, setting):
    assert validate(settings(extra_flags=[flag])) == [
        f"inventory value extra_flags[0]={flag!r} is rendered from the inventory setting {setting}: set that "
        "instead, so the flag is spelled right for the installed SGLang"]


def test_secrets_are_8_to_4096_printable_characters_and_never_quoted_back():
    ok = "k" * 8
    assert env_file_problems(settings(), {"api_key": ok, "hf_token": "t" * 4096}) == []
    assert env_file_problems(settings(), {"api_key": "", "hf_token": None}) == []
    length = ("secret {} must be 8 to 4096 characters long (a shorter one cannot be redacted from the logs "
              "safely)")
    # an empty api_key is skipped, and the check goes on to hf_token
    assert env_file_problems(settings(), {"api_key": "", "hf_token": "t" * 4097}) == [length.format("hf_token")]
    assert env_file_problems(settings(), {"api_key": "k" * 7}) == [length.format("api_key")]
    chars = ("secret api_key may hold printable ASCII only, without spaces, quotes or backslashes (it must read "
             "the same in every log format it could be redacted from)")
    for bad in ("key with spaces", "quote'd-key", 'dq"uoted-key', "back\\slash-key", "unicodé-key"):
        assert env_file_problems(settings(), {"api_key": bad}) == [chars], bad
    assert env_file_problems(settings(), {"api_key": 12345678}) == ["secret api_key must be a string"]
    assert env_file_problems(settings(), {"ssh_key": ok}) == [
        "secret 'ssh_key' is not one noderig knows (known: api_key, hf_token)"]


def test_one_problem_is_raised_as_itself_and_several_as_a_list():
    with pytest.raises(NoderigError) as one:
        raise_problems(["inventory value x=1 is wrong"])
    assert str(one.value) == "inventory value x=1 is wrong"
    with pytest.raises(NoderigError) as two:
        raise_problems(["first", "second"])
    assert str(two.value) == "the inventory has 2 problems:\n  - first\n  - second"


def test_the_unit_runs_as_a_plain_system_user_never_root():
    for good in ("sglang", "_svc", "a-b_1", "a" * 31):
        assert own_problems("service_user", user=good) == [], good
    for bad in ("Sglang", "1abc", "a" * 32, "a b", 7):
        assert own_problems("service_user", user=bad) == [
            f"inventory value service_user={bad!r} must be a system user name (lowercase letters, digits, _ and -, "
            "at most 31)"], bad
    assert own_problems("service_user", user="root") == [
        "inventory value service_user='root' is refused: the server must not run as root; use a dedicated system "
        "user such as 'sglang' (the deploy creates it)"]


def test_the_restart_policy_is_one_of_three():
    for good in ("no", "on-failure", "on-abnormal"):
        assert own_problems("restart", restart=good) == [], good
    assert own_problems("restart", restart="always") == [
        "inventory value restart='always' must be one of no, on-failure, on-abnormal"]


def test_a_bracketed_ipv6_head_address_is_read_whole():
    assert own_problems("dist_init_addr", dist_init_addr="[1:2:3:4:5:6:7:8]:25000") == []


def test_an_extra_flag_is_named_by_what_comes_before_its_first_equals_sign():
    assert validate(settings(extra_flags=["--model-path=/m=1"])) == [
        "inventory value extra_flags[0]='--model-path=/m=1' is rendered from the inventory setting model_dir: set "
        "that instead, so the flag is spelled right for the installed SGLang"]


DDTREE = {"speculative": "ddtree", "draft_dir": "/models/draft", "attention_backend": "flashinfer"}


def cross_problems(**fields) -> list[str]:
    """The problems that are not one setting's own (the rules across settings)."""
    return [p for p in validate(settings(**fields)) if not p.startswith("inventory value ")]


def test_the_ddtree_rules_in_the_words_the_user_reads():
    assert cross_problems(**DDTREE) == []
    assert cross_problems(**{**DDTREE, "page_size": 16}) == [
        "DDTree (speculative=ddtree) needs page_size 1, the inventory has page_size=16"]
    assert cross_problems(**{**DDTREE, "attention_backend": None}) == [
        "DDTree (speculative=ddtree) needs page size 1, which attention_backend=None does not allow (unset means "
        "trtllm_mla on Blackwell); set attention_backend to flashinfer or triton"]
    assert cross_problems(**{**DDTREE, "disable_overlap_schedule": False}) == [
        "DDTree (speculative=ddtree) runs only with the overlap scheduler disabled; set disable_overlap_schedule to "
        "true or leave it unset"]
    assert cross_problems(**{**DDTREE, "pp_size": 2}) == [
        "speculative=ddtree (DFLASH-based) needs pp_size 1, the inventory has pp_size=2"]
    assert cross_problems(**{**DDTREE, "speculative_num_steps": 2}) == [
        "speculative=ddtree forces speculative_num_steps to 1 (DFLASH drafts one block per step), the inventory "
        "has 2; leave it unset"]
    assert cross_problems(**{**DDTREE, "speculative_eagle_topk": 1, "speculative_num_steps": 1}) == []


def test_speculative_none_takes_no_draft_settings():
    unused = "speculative=none does not use draft_attention_backend or speculative_num_draft_tokens; unset them"
    assert cross_problems(draft_attention_backend="triton") == [unused]
    assert cross_problems(speculative_num_draft_tokens=8) == [unused]
    assert cross_problems() == []


@pytest.mark.parametrize("fields,own", [
    # a setting that failed its own check is reported once, not again by a rule that reads it
    ({"speculative": "medusa"}, "speculative"),
    ({**DDTREE, "page_size": 0}, "page_size"),
    ({**DDTREE, "attention_backend": "a b"}, "attention_backend"),
    ({**DDTREE, "pp_size": 0}, "pp_size"),
    ({**DDTREE, "speculative_num_steps": 0}, "speculative_num_steps"),
    ({"speculative": "eagle3", "draft_dir": "/d", "ddtree_budget": 0}, "ddtree_budget"),
    ({"tp_size": 6, "ep_size": 4}, "tp_size"),
    ({"tp_size": 8, "ep_size": 3}, "ep_size"),
])
def test_a_rule_across_settings_skips_a_setting_that_already_failed(fields, own):
    problems = validate(settings(**fields))
    assert [p for p in problems if p.startswith(f"inventory value {own}=")], problems
    assert cross_problems(**fields) == [], problems


def test_tp_must_divide_by_ep():
    assert cross_problems(tp_size=8, ep_size=16) == ["tp_size=8 must be divisible by ep_size=16"]


def test_the_environment_is_a_mapping_of_names_to_one_line_values():
    label = "inventory value server_environment"
    assert own_problems("server_environment", environment=["A=1"]) == [
        "inventory value server_environment=['A=1'] must be a mapping of variable names to values"]
    assert validate(settings(environment={"NCCL_DEBUG": "INFO", "OMP_NUM_THREADS": 8, "RATIO": 0.5})) == []
    assert validate(settings(environment={"HF_TOKEN": "x"})) == [
        f"{label}['HF_TOKEN'] is reserved: the API key and Hub token are secrets (render_env's secrets), never "
        "inventory values"]
    for bad in (True, None, ["a"]):
        assert validate(settings(environment={"A": bad})) == [f"{label}['A']={bad!r} must be a string or a number"]
    # a line break, a control character, a lone surrogate, Unicode's line and paragraph separators
    for bad in ("a\nb", "a\x00b", "a\ud800b", "a\u2028b", "a\u2029b", "a\x85b"):
        assert validate(settings(environment={"A": bad})) == [
            f"{label}['A']={bad!r} contains a line break or control character"], repr(bad)
    assert validate(settings(environment={"1A": "x"})) == [
        f"{label}['1A'] has an invalid variable name: use letters, digits and _, not starting with a digit"]


def test_a_host_that_is_not_a_string_is_not_a_host():
    assert own_problems("server_host", host=5) == ["inventory value server_host=5 must be an IP address or a host name"]


def test_the_api_key_never_goes_in_argv_as_an_extra_flag():
    for flag in ("--api-key", "--api-key=sk-123456", "--api-k"):
        assert validate(settings(extra_flags=[flag])) == [
            f"inventory value extra_flags[0]={flag!r} would put the API key in argv: give it as the api_key secret "
            "(it goes to the 0600 environment file)"], flag


@pytest.mark.parametrize("words,flag,setting", [
    (["--hos", "0.0.0.0"], "--host", "server_host"), (["--ho=0.0.0.0"], "--host", "server_host"),
    (["--po", "8080"], "--port", "server_port"), (["--model", "/tmp/m"], "--model-path", "model_dir"),
    (["--ep", "8"], "--ep-size", "ep_size"), (["--served-model", "x"], "--served-model-name", "served_model_name")])
def test_an_extra_flag_that_abbreviates_a_rendered_one_is_refused_before_any_change(words, flag, setting):
    # argparse takes a unique prefix for the whole flag, and the last one given wins: --hos 0.0.0.0
    # after the validated --host 127.0.0.1 would bind every interface (once caught only at the service step)
    assert validate(settings(extra_flags=words)) == [
        f"inventory value extra_flags[0]={words[0]!r} abbreviates {flag}, which is rendered from the inventory "
        f"setting {setting}: set that instead"]


@pytest.mark.parametrize("flag", ["--api", "--ap=sk-1234567890", "--api-"])
def test_an_abbreviated_api_key_flag_is_refused_too(flag):
    assert validate(settings(extra_flags=[flag])) == [
        f"inventory value extra_flags[0]={flag!r} would put the API key in argv: give it as the api_key secret "
        "(it goes to the 0600 environment file)"]


def test_an_extra_flag_that_ends_the_options_is_refused():
    # after "--" argparse takes every word as positional, the launcher's --api-key=... included
    assert validate(settings(extra_flags=["--"])) == [
        "inventory value extra_flags[0]='--' ends the server's options (every word after it, the API key the "
        "launcher adds included, would be taken as an argument); remove it"]


@pytest.mark.parametrize("key", ["served_model_name", "reasoning_parser", "tool_call_parser", "attention_backend"])
def test_a_word_setting_never_starts_with_a_dash(key):
    # rendered as the value after its flag, "--host=0.0.0.0" would be read as a flag of its own
    assert own_problems(key, **{key: "--host=0.0.0.0"}) == [
        f"inventory value {key}='--host=0.0.0.0' must not start with '-' (the server would read it as a flag)"]


def test_the_nodes_installed_sglang_picks_the_spellings_when_the_inventory_does_not():
    assert validate(settings(), installed_version=None) == []
    assert validate(settings(), installed_version="0.5.9") == []
    assert validate(settings(), installed_version="0.1.0") == [
        "the node's SGLang 0.1.0 is older than 0.5.9, the oldest release noderig knows the flags of"]
    # the inventory's own sglang_version wins: the node's release is not asked about
    assert validate(settings(sglang_version="0.5.9"), installed_version="0.1.0") == []
