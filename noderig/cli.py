"""The `noderig` command. The deploy itself runs through pyinfra's CLI; this holds the rest:
the lab now, and the offline tools (verify, diagnose) as they arrive."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from .errors import NoderigError


def _lab():
    from .lab.lab import Lab  # the lab pulls in more than the other subcommands need

    return Lab()


def cmd_lab_up(args) -> int:
    inventory = _lab().up(targets=args.targets, inventory=args.inventory)
    print(inventory)  # last line: the inventory path, for `pyinfra "$(noderig lab up | tail -1)" deploy.py`
    return 0


def cmd_lab_status(args) -> int:
    status = _lab().status()
    if args.json:
        print(json.dumps(status, indent=2))
    elif not status["hosts"]:
        print("the lab is down (no lab record); start it with `noderig lab up`")
    else:
        print(f"services: {status['services']}  hub: {status['hub_url']}")
        for h in status["hosts"]:
            print(f"{h['name']:<10} {h['role']:<10} {h['ip']:<14} {h['state']}")
        print(f"inventory: {status['inventory']}")
    return 0 if status["up"] else 1


def cmd_lab_ssh(args) -> int:
    argv = _lab().ssh_argv(args.host, args.command)
    os.execvp(argv[0], argv)
    return 127  # not reached


def cmd_lab_down(args) -> int:
    _lab().down()
    print("lab down")
    return 0


def cmd_diagnose(args) -> int:
    from .diagnose import diagnose  # lazily: the other subcommands do not need the catalog
    from .diagnose.report import print_report, to_json

    if args.file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(args.file).read_text(errors="replace")
        except OSError as e:
            print(f"noderig diagnose: cannot read {args.file}: {e.strerror or e}", file=sys.stderr)
            return 2
    result = diagnose(text)
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

    lab = sub.add_parser("lab", help="the test lab: real Debian hosts (systemd-nspawn), a local Hub, a package source")
    lab_sub = lab.add_subparsers(dest="lab_command", required=True)
    up = lab_sub.add_parser("up", help="boot the lab (reference ct200 + targets) and write its pyinfra inventory")
    up.add_argument("--targets", type=int, default=1, help="number of bare target hosts (default 1: b300)")
    up.add_argument("--inventory", type=Path, help="where to write the inventory (default inventory/lab.py)")
    up.set_defaults(func=cmd_lab_up)
    status = lab_sub.add_parser("status", help="hosts and services of the running lab")
    status.add_argument("--json", action="store_true")
    status.set_defaults(func=cmd_lab_status)
    ssh = lab_sub.add_parser("ssh", help="a shell, or one command, on a lab host")
    ssh.add_argument("host")
    ssh.add_argument("command", nargs=argparse.REMAINDER)
    ssh.set_defaults(func=cmd_lab_ssh)
    down = lab_sub.add_parser("down", help="stop every host and service the lab started, remove its network")
    down.set_defaults(func=cmd_lab_down)

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

    diag = sub.add_parser("diagnose", help="name the root cause of a failed launch from its log (exit 0: healthy, 1: failure)")
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
