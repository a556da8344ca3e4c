"""Entry point: `python -m sglang.launch_server --model-path ... [flags]`."""

import os
import sys

from sglang.srt.entrypoints.http_server import launch_server
from sglang.srt.server_args import prepare_server_args
from sglang.srt.utils import configure_logger, kill_process_tree

if __name__ == "__main__":
    configure_logger("info")  # so argument adjustments made while parsing are logged
    server_args = prepare_server_args(sys.argv[1:])
    configure_logger(server_args.log_level)
    try:
        launch_server(server_args)
    finally:
        kill_process_tree(os.getpid(), include_parent=False)
