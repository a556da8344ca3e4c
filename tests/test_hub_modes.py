"""The whole deploy through each kind of Hub the lab can play: the real Hub's shape (tree with
LFS fields, /resolve/ redirecting to a signed CDN), a self-hosted mirror (model_info without
sizes or LFS, /resolve/ answering 200 itself, 307 on tree routes), and a server without Range
support. Each converges, reruns as a no-op, and repairs a damaged shard."""

from __future__ import annotations

import time

import pytest

from tests.conftest import changed_ops, deploy, hub_call

pytestmark = pytest.mark.lab

MODEL_DIR = "/models/Kimi-K2.6"
SHARD = "model-00002-of-000004.safetensors"
STEPS = "steps=prerequisites,checkpoint"
MODES = {"hub": {}, "mirror": {"mirror": True}, "mirror-no-range": {"mirror": True, "no_range": True}}


@pytest.mark.parametrize("mode", list(MODES))
def test_the_deploy_converges_reruns_and_repairs_through_each_hub(lab, mode):
    lab.reset("b300")
    hub_call(lab, "/_lab/reset", {})
    hub_call(lab, "/_lab/faults", MODES[mode])
    try:
        began = time.monotonic()
        res, out = deploy(lab, STEPS)
        took = time.monotonic() - began
        assert res.returncode == 0, out[-4000:]
        stats = hub_call(lab, "/_lab/stats")["requests"]
        print(f"{mode}: first deploy {took:.1f} s, Hub requests {stats['by_kind']}")
        if mode != "hub":
            redirects = hub_call(lab, "/_lab/stats")["status"]["by_kind"].get("resolve", {})
            assert "302" not in redirects, "a mirror answers /resolve/ itself"

        res, out = deploy(lab, STEPS)
        assert res.returncode == 0 and changed_ops(out) == {}, out[-3000:]

        lab.run("b300", f"printf 'XXXX' | dd of={MODEL_DIR}/{SHARD} bs=1 seek=4096 conv=notrunc status=none")
        lab.run("b300", f"touch -d '2001-01-01' {MODEL_DIR}/{SHARD}")
        res, out = deploy(lab, STEPS)
        assert res.returncode == 0 and SHARD in out, out[-3000:]
        verified = lab.run("b300", f"sha256sum {MODEL_DIR}/{SHARD}").stdout.split()[0]
        listed = next(f for f in _manifest(lab)["files"] if f["path"] == SHARD)
        assert verified == listed["sha256"]
    finally:
        hub_call(lab, "/_lab/reset", {})


def _manifest(lab) -> dict:
    import json

    return json.loads(lab.run("b300", f"cat {MODEL_DIR}/.noderig/manifest.json").stdout)
