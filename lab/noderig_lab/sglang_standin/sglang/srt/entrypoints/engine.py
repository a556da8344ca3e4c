"""Start the scheduler ranks and wait until each reports ready, as SGLang's Engine does."""

import logging
import multiprocessing as mp
import os
import signal

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.managers.scheduler import run_scheduler_process
from sglang.srt.managers.tokenizer_manager import TokenizerManager
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils import kill_process_tree

logger = logging.getLogger(__name__)


def _sigquit_handler(signum, frame):
    # Schedulers send SIGQUIT to the launcher when they hit an exception.
    logger.error("Received sigquit from a child process. It usually means the child failed.")
    kill_process_tree(os.getpid())


def launch_subprocesses(server_args: ServerArgs):
    """Returns (TokenizerManager, rank-0 scheduler info), or (None, None) on a non-head node."""
    server_args.check_server_args()
    logger.info(f"{server_args=}")
    signal.signal(signal.SIGQUIT, _sigquit_handler)

    ctx = mp.get_context("spawn")
    ranks_per_node = server_args.tp_size // server_args.nnodes
    first_rank = ranks_per_node * server_args.node_rank
    procs, conns = [], []
    for tp_rank in range(first_rank, first_rank + ranks_per_node):
        parent_conn, child_conn = ctx.Pipe()
        proc = ctx.Process(target=run_scheduler_process, args=(server_args, tp_rank, child_conn),
                           name=f"sglang::scheduler_TP{tp_rank}", daemon=True)
        proc.start()
        child_conn.close()
        procs.append(proc)
        conns.append(parent_conn)

    scheduler_infos = []
    for i, conn in enumerate(conns):
        try:
            data = conn.recv()
        except EOFError:
            logger.error(f"Rank {first_rank + i} scheduler is dead. Please check if there are relevant logs.")
            procs[i].join()
            logger.error(f"Exit code: {procs[i].exitcode}")
            raise
        if data["status"] != "ready":
            raise RuntimeError("Initialization failed. Please see the error messages above.")
        scheduler_infos.append(data)

    if server_args.node_rank >= 1:
        # Ranks on other nodes serve no HTTP; they live as long as their schedulers do.
        for proc in procs:
            proc.join()
        return None, None
    model_config = ModelConfig.from_path(server_args.model_path, server_args.context_length)
    return TokenizerManager(server_args, model_config, conns, procs), scheduler_infos[0]
