"""What `noderig bench` shows: the layouts side by side in the terminal, and a PNG of
tokens/s per GPU against tokens/s per user with the Pareto front marked."""

from __future__ import annotations

from pathlib import Path

from .benchmark import cell_text, pareto_front, plottable, table_rows


def print_table(records: list[dict], console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    console = console or Console()
    layouts, rows = table_rows(records)
    failed = {r["layout"]: r for r in records if r["status"] == "layout_failed"}
    hosts = sorted({r["host"] for r in records})
    table = Table(title=f"noderig bench: {', '.join(hosts)}", show_lines=True)
    table.add_column("workload", style="bold")
    table.add_column("conc.", justify="right")
    for name in layouts:
        table.add_column(name, justify="right")
    for workload, concurrency, by_layout in rows:
        table.add_row(workload, str(concurrency),
                      *(cell_text(by_layout.get(name), name in failed and name not in by_layout) for name in layouts))
    console.print(table)
    for name, record in failed.items():
        console.print(f"[red]{name} did not start:[/red] {record['error']}")


def write_plot(records: list[dict], path: Path) -> Path | None:
    """One point per (layout, workload, concurrency), a colour per layout, the concurrency
    beside each point, the Pareto front per workload as a line. None: nothing to plot."""
    points = plottable(records)
    if not points:
        return None
    import matplotlib

    matplotlib.use("Agg")  # no display on a controller
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 6), dpi=120)
    layouts = list(dict.fromkeys(r["layout"] for r in points))
    workloads = list(dict.fromkeys(r["workload"] for r in points))
    markers = "osD^vP*X"
    colors = plt.get_cmap("tab10")
    for li, layout in enumerate(layouts):
        for wi, workload in enumerate(workloads):
            mine = [r for r in points if r["layout"] == layout and r["workload"] == workload]
            if not mine:
                continue
            ax.scatter([r["tok_s_per_user"] for r in mine], [r["tok_s_per_gpu"] for r in mine], s=60,
                       color=colors(li % 10), marker=markers[wi % len(markers)], label=f"{layout} · {workload}",
                       zorder=3)
            for r in mine:
                ax.annotate(f"c{r['concurrency']}", (r["tok_s_per_user"], r["tok_s_per_gpu"]),
                            textcoords="offset points", xytext=(6, 4), fontsize=8)
    for workload in workloads:
        mine = [r for r in points if r["workload"] == workload]
        xy = [(r["tok_s_per_user"], r["tok_s_per_gpu"]) for r in mine]
        front = [xy[i] for i in pareto_front(xy)]
        ax.plot([p[0] for p in front], [p[1] for p in front], "--", color="black", linewidth=1.2, zorder=2,
                label=f"Pareto front · {workload}")
        ax.scatter([p[0] for p in front], [p[1] for p in front], s=180, facecolors="none", edgecolors="black",
                   linewidths=1.2, zorder=4)
    hosts = ", ".join(sorted({r["host"] for r in points}))
    ax.set_title(f"Throughput per GPU against speed per user ({hosts})")
    ax.set_xlabel("output tokens/s per user (1000 / median TPOT)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.grid(True, alpha=0.3)
    ax.set_xlim(left=0)
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path
