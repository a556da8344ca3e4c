"""Defaults for every host; an inventory's host data (or --data k=v) overrides any of them.

The reference case: Kimi K2.6 (~595 GB, 64 shards) on 8x B300 with SGLang and DDTree
speculative decoding, the venv copied from a reference machine where SGLang already works.
"""

# Topology: which host holds the working venv (must be in the inventory's `reference` group).
reference_host = "ct200"
venv_path = "/opt/sglang/venv"  # same absolute path on both hosts: a venv is not relocatable
venv_import_check = "sglang"  # the copied venv's Python must import this on the node
venv_transfer = "auto"  # direct (reference rsyncs to the node) | relay (via the controller) | auto
# The reference sends the venv once: further targets copy it from a target that has it
# (the holders double each round); False: every target from the reference.
venv_from_peers = True

# Hub and checkpoint. Pin revisions to commit shas for a reproducible deploy.
hf_endpoint = "https://huggingface.co"
# Plain http to the Hub sends the token in clear: refused unless this says so (a mirror on
# a network you trust; the lab's inventory sets it).
allow_insecure_hub_http = False
hf_token_file = None  # a 0600 file with the token; else $HF_TOKEN on the controller
model_repo = "moonshotai/Kimi-K2.6"
model_revision = "main"
model_dir = "/models/Kimi-K2.6"
draft_repo = "z-lab/Kimi-K2.6-DFlash"  # gated: needs a token with access
draft_revision = "main"
draft_dir = "/models/Kimi-K2.6-DFlash"
# Files to fetch (shards, index, configs, tokenizer, remote code).
checkpoint_patterns = ["*.safetensors", "*.json", "*.py", "*.model", "*.jinja", "*.tiktoken", "*.txt"]
aria2_connections = 16
aria2_jobs = 4
# Fleet fan-out (two or more targets): each checkpoint file crosses the uplink once. The
# targets fetch a stripe each from the Hub, then the rest from each other (nginx, Debian's,
# serving verified files to the fleet's peers only, on fanout_port, for the fan-out alone).
fanout = True
# The checkpoint download starts right after preflight, as soon as aria2 is installed, and the
# other prerequisites and the venv copy run while it is in flight (False: after them).
download_first = True
# A new checkpoint revision for a node that serves is prepared beside the live one (the
# files both share are hard-linked) and made live at its restart in its rollout batch, when
# the changed files fit on the volume; else, and always when False, it is fetched into
# model_dir within the node's batch after its server stopped (a rollback then keeps it).
checkpoint_beside = True
fanout_port = 8378
fanout_address = None  # where the other targets reach this one; None: its ssh_hostname
fanout_keep_serving = False  # True: the peer server keeps serving after the deploy

# Node prerequisites (python3-dev: Triton/SGLang JIT compiles against Python.h).
packages = ["python3-dev", "aria2", "rsync", "curl"]
# CUDA headers for kernels that JIT-compile against the toolkit (from NVIDIA's apt
# repository, which the node must already have), e.g. ["cuda-toolkit-12-8"].
cuda_packages = []
gpus_required = 8

# Server.
service_name = "sglang"
served_model_name = "kimi-k2.6"
# Loopback only unless you decide otherwise: beyond loopback needs api_key_file, or
# allow_unauthenticated_network_access = True (the deploy refuses it before any change).
server_host = "127.0.0.1"
server_port = 30000
allow_unauthenticated_network_access = False
service_user = "sglang"  # the dedicated system user the server runs as (created; never root)
# (The server's launcher is always /usr/local/lib/noderig/launch.py, the file the unit runs:
# not a setting; an inventory that sets launcher_path is refused.)
# The node firewall (nftables, noderig's own `table inet noderig`, no other table touched):
# SSH and the API port open, every other TCP/UDP port closed to other hosts. False removes it.
firewall = True
firewall_api_allow = []  # addresses/networks that may reach the API port; [] = any host
firewall_peers = []  # fleet peers (multi-node serving): every TCP/UDP port open to these addresses
firewall_peer_ports = []  # limit the peers to these ports or "low-high" ranges; [] = all ports
tp_size = 8
ep_size = 1
trust_remote_code = True
reasoning_parser = "kimi_k2"
tool_call_parser = "kimi_k2"
mem_fraction_static = None
attention_backend = "flashinfer"  # DDTree needs page size 1; the Blackwell default (trtllm_mla) forces 64
skip_server_warmup = True  # the vision-tower warmup fails without flash_attn.cute on these nodes
speculative = "ddtree"  # ddtree | ddtree-dflash | dflash | eagle3 | none
ddtree_budget = None  # None: the fork's default (block size - 1)
page_size = 1  # DDTree requires 1
extra_flags = []
server_environment = {}
api_key_file = None  # a 0600 file on the controller; the server then requires it (Bearer)
sglang_version = None  # flag spellings of this SGLang release; None: the installed one
# Which steps to run (comma list of preflight, prerequisites, environment, checkpoint,
# service, readiness), e.g. --data steps=environment; preflight always runs.
steps = "all"
# After a failed launch: apply the diagnosed fix when the deploy can (recorded on the node in
# /etc/noderig/repairs.json so later runs keep it), at most max_repairs times per run.
repair = False
max_repairs = 2
# Changing a fleet that serves: the nodes whose server must restart go in batches (Ansible's
# serial: a number, a percentage of those nodes, or a comma list whose last size repeats);
# each batch is written, restarted and checked ready before the next; a node that fails is
# rolled back to its last known good state. The rollout stops when more than
# max_fail_percentage percent of a batch failed (0: at the first failure).
rollout = "1,25%,100%"
max_fail_percentage = 0
start_timeout = 1800  # load + CUDA graph capture of ~590 GB takes minutes
ready_timeout = 1800
