"""The lab: real stand-ins for the parts that need GPUs or the internet (Hub, hosts, packages,
server). Test infrastructure and the demo, installed beside noderig by scripts/setup; never
part of noderig's own wheel. It uses noderig's core; the core never imports it."""

from pathlib import Path

# Shipped as package data, used as files rather than imported:
# the stand-in SGLang, a distribution of its own pip-installed into the reference host's venv,
STANDIN_SOURCE = Path(__file__).parent / "sglang_standin"
# and the lab's nvidia-smi, which answers noderig's GPU query for GPUs a test lists.
FAKE_NVIDIA_SMI = Path(__file__).parent / "nvidia-smi"
