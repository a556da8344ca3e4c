"""A real pair: the reference machine where SGLang already serves, and a new 8x B300 node.

    pyinfra inventory/b300.py deploy.py --dry --diff
    pyinfra inventory/b300.py deploy.py

Defaults (model, DDTree, ports, paths) are in group_data/all.py; override per host here.
"""

reference = [
    ("ct200", {"ssh_hostname": "ct200.example.internal", "ssh_user": "root"}),
]

targets = [
    ("b300", {
        "ssh_hostname": "b300.example.internal",
        "ssh_user": "root",
        "model_revision": "main",  # pin to a commit sha for reproducible deploys
        "tp_size": 8,
        "speculative": "ddtree",
        "ddtree_budget": 32,
        "hf_token_file": "~/.config/noderig/hf_token",  # 0600; the draft repo is gated
    }),
]
