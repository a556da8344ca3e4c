"""Step 5, service: the SGLang systemd unit rendered from the template, installed, running."""

from __future__ import annotations

from pathlib import Path

from pyinfra.operations import files, systemd

from noderig.unit import ServerSettings, exec_start, server_argv

TEMPLATE = Path(__file__).resolve().parent.parent / "templates" / "sglang.service.j2"


def unit_path(service: str) -> str:
    return f"/etc/systemd/system/{service}.service"


def install(service: str, settings: ServerSettings, start_timeout: int, env_file: str, restart_if: list):
    """Render and install the unit; reload systemd when it changed; start and enable it; restart
    it when the unit or anything it runs (``restart_if`` operations) changed."""
    argv = server_argv(settings)
    unit = files.template(
        name=f"Render {service}.service",
        src=str(TEMPLATE),
        dest=unit_path(service),
        mode="644",
        exec_start=exec_start(argv),
        served_model_name=settings.served_model_name,
        model_dir=settings.model_dir,
        env_file=env_file,
        start_timeout=start_timeout,
        service=service,
    )
    systemd.daemon_reload(name="Reload systemd (unit changed)", _if=unit.did_change)
    changed = [unit, *restart_if]
    systemd.service(
        name=f"Restart {service} (unit, venv or checkpoint changed)", service=f"{service}.service",
        running=True, restarted=True, _if=lambda: any(op.did_change() for op in changed),
    )
    systemd.service(name=f"{service} running and enabled", service=f"{service}.service", running=True, enabled=True)
    return unit
