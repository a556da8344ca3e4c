"""The `noderig` command. The deploy itself runs through pyinfra's CLI; this holds the rest:
the offline tools (verify, diagnose), and `lab` when the development checkout's lab is installed."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import entry_points
from pathlib import Path

from .errors import NoderigError


# Subcommands another distribution adds: an entry point in this group names a function that
# adds its subparsers. The lab (lab/, installed by scripts/setup) adds `lab` this way, so the
# product never imports it and its wheel works without it.
COMMANDS_GROUP = "noderig.commands"
LAB_ABSENT = ("noderig lab: the lab is part of the development checkout, not of this install: "
              "run scripts/setup in a clone of the noderig repository, then .venv/bin/noderig lab")


def cmd_lab_absent(args) -> int:
    print(LAB_ABSENT, file=sys.stderr)
    return 2


def _add_installed_commands(sub) -> set[str]:
    """The subcommands the installed entry points of `COMMANDS_GROUP` add; their names."""
    added = set()
    for entry in entry_points(group=COMMANDS_GROUP):
        if entry.name in added:  # the same distribution seen twice on sys.path
            continue
        entry.load()(sub)
        added.add(entry.name)
    return added


def cmd_diagnose(args) -> int:
    from .diagnose import diagnose  # lazily: the other subcommands do not need the catalog
    from .diagnose.report import print_report, to_json

    from .diagnose.logfile import LogInputError, log_text

    try:
        data = sys.stdin.buffer.read() if args.file == "-" else Path(args.file).read_bytes()
        text = log_text(data, "standard input" if args.file == "-" else args.file)
    except OSError as e:
        print(f"noderig diagnose: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
        return 2
    except LogInputError as e:
        print(f"noderig diagnose: {e}", file=sys.stderr)
        return 2
    try:
        result = diagnose(text)
    except Exception as e:  # noqa: BLE001 - a bug of ours on text we did not write: exit 2, never 0 or 1
        from .diagnose.engine import not_diagnosed

        what = "standard input" if args.file == "-" else args.file
        print(f"noderig diagnose: could not diagnose {what}: {not_diagnosed(e, 'a pager')}", file=sys.stderr)
        return 2
    if args.json:
        print(to_json(result))
    else:
        print_report(result)
    return 0 if result.healthy else 1


def cmd_verify(args) -> int:
    from .verify import cmd_verify as run

    return run(args)


def cmd_bench(args) -> int:
    # The benchmark drives pyinfra (inventory, SSH, the deploy for layouts): its host side
    # lives beside the operations, in the checkout that holds deploy.py.
    root = str(Path(__file__).resolve().parents[1])
    if root not in sys.path:
        sys.path.insert(0, root)
    # pyinfra's CLI patches gevent into the process when imported, as pyinfra's SSH needs. Here, before the
    # benchmark starts any thread (rich's live display): patched later, their locks break. operations.bench leaves it
    # to this entry, so that merely importing it patches nothing (a pytest-xdist worker waits on real threads).
    import pyinfra_cli  # noqa: F401
    from operations.bench import run_bench

    from .benchmark import BenchError

    try:
        return run_bench(Path(args.inventory), limit=args.limit, workload_names=args.workload or ["chat"],
                         workloads_file=args.workloads, layouts_text=args.layouts, out_dir=args.out,
                         tokenizer=args.tokenizer)
    except BenchError as e:
        raise NoderigError(str(e)) from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="noderig", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    if "lab" not in _add_installed_commands(sub):
        lab = sub.add_parser("lab", help="the test lab (in the development checkout only: scripts/setup)")
        lab.add_argument("args", nargs=argparse.REMAINDER)
        lab.set_defaults(func=cmd_lab_absent)

    verify = sub.add_parser("verify", help="check a checkpoint directory: safetensors headers, index, sha256 (against "
                                           "DIR/.noderig/manifest.json or --manifest); exit 0 only if all pass")
    verify.add_argument("dir", help="the checkpoint directory")
    verify.add_argument("--json", action="store_true", help="print the report as JSON")
    verify.add_argument("--manifest", help="the manifest to check sha256 against (default DIR/.noderig/manifest.json "
                                           "if present; without one, structure only)")
    verify.add_argument("--repo", help="check against this Hub repo's listing (as `hf cache verify REPO --local-dir "
                                       "DIR` does), for a directory noderig did not download")
    verify.add_argument("--revision", help="with --repo: branch, tag or commit (default main)")
    verify.add_argument("--endpoint", help="with --repo: the Hub or mirror (default $HF_ENDPOINT or huggingface.co)")
    verify.add_argument("--token-file", help="with --repo: a 0600 file with the Hub token (default $HF_TOKEN)")
    verify.add_argument("--jobs", type=int, help="files hashed at once (default min(8, CPUs))")
    verify.add_argument("--structure-only", action="store_true", help="headers, sizes and index only; no hashing")
    verify.add_argument("--no-record", action="store_true",
                        help="hash every file again; neither read nor write the verified-state record")
    verify.add_argument("--all", action="store_true", help="list every file, not only the ones that fail")
    verify.set_defaults(func=cmd_verify)

    bench = sub.add_parser("bench", help="benchmark each target's endpoint (sglang.bench_serving on the node, else "
                                         "aiperf through a forwarded port); --layouts compares parallelism layouts")
    bench.add_argument("inventory", help="the pyinfra inventory (its targets are benchmarked)")
    bench.add_argument("--limit", action="append", metavar="HOST", help="only this target (repeatable)")
    bench.add_argument("--workload", action="append", metavar="NAME",
                       help="a named workload from noderig/bench_workloads.toml (repeatable; default chat)")
    bench.add_argument("--workloads", type=Path, metavar="FILE", help="a TOML file of more workloads")
    bench.add_argument("--layouts", metavar="L1,L2,...",
                       help="deploy and benchmark each layout (tp8, ep8, tp4-ep2, tp8-dpa, ...-nospec), then "
                            "restore the inventory's own layout")
    bench.add_argument("--out", type=Path, default=Path("noderig-bench"),
                       help="records.jsonl (appended), the plot and each run's files (default ./noderig-bench)")
    bench.add_argument("--tokenizer", help="aiperf's tokenizer for prompts: a Hub id or a directory (default: a "
                                           "byte tokenizer that needs no network; the server counts the tokens)")
    bench.set_defaults(func=cmd_bench)

    diag = sub.add_parser("diagnose", help="name the root cause of a failed launch from its log "
                          "(exit 0: healthy, 1: failure, 2: no diagnosis)")
    diag.add_argument("file", metavar="FILE|-", help="a saved journal / log / paste, or - for standard input")
    diag.add_argument("--json", action="store_true", help="machine-readable output")
    diag.set_defaults(func=cmd_diagnose)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except NoderigError as e:
        print(f"noderig: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
