"""Scheduler: one process per TP rank. Builds the model, then runs every request it is sent.

All ranks receive every request (TP ranks run the same batch), so a failing forward fails
on every rank, and each one reports it the way SGLang's schedulers do: log the traceback,
then SIGQUIT the launcher, which takes the whole process tree down.
"""

import logging
import os
import signal
import time
import traceback

from sglang.srt.configs.model_config import ModelConfig
from sglang.srt.managers.schedule_batch import ForwardBatch
from sglang.srt.model_executor.model_runner import FakeGpuMemory, ModelRunner
from sglang.srt.server_args import ServerArgs
from sglang.srt.utils import (INTERNAL_PORT_OFFSET, configure_logger, kill_itself_when_parent_died,
                               open_internal_listener, standin_sleep)

logger = logging.getLogger(__name__)
DECODE_LOG_INTERVAL = 40


class Scheduler:
    def __init__(self, server_args: ServerArgs, tp_rank: int):
        self.server_args, self.tp_rank = server_args, tp_rank
        self.model_config = ModelConfig.from_path(server_args.model_path, server_args.context_length)
        gpu = FakeGpuMemory(tp_rank)
        self.model_runner = ModelRunner(self.model_config, server_args, tp_rank, gpu)
        self.draft_runner = None
        if server_args.speculative_draft_model_path and server_args.speculative_algorithm != "NGRAM":
            draft_config = ModelConfig.from_path(server_args.speculative_draft_model_path)
            self.draft_runner = ModelRunner(draft_config, server_args, tp_rank, gpu, is_draft_worker=True)
        self.max_total_num_tokens = self.model_runner.max_total_num_tokens
        self.max_running_requests = server_args.max_running_requests or 2048
        self.chunked_prefill_size = server_args.chunked_prefill_size or 16384
        if tp_rank == 0:
            logger.info(
                f"max_total_num_tokens={self.max_total_num_tokens}, chunked_prefill_size={self.chunked_prefill_size}, "
                f"max_prefill_tokens=16384, max_running_requests={self.max_running_requests}, "
                f"context_len={self.model_config.context_len}, available_gpu_mem={gpu.avail:.2f} GB"
            )

    def event_loop_normal(self, conn):
        for req in iter(conn.recv, None):
            self.process_request(req, conn)

    def event_loop_overlap(self, conn):
        # SGLang overlaps CPU scheduling with the GPU forward here; the stand-in has nothing to overlap.
        for req in iter(conn.recv, None):
            self.process_request(req, conn)

    def process_request(self, req: dict, conn):
        result = self.run_batch(ForwardBatch.from_request(req), req["max_new_tokens"], req.get("paced", False))
        if self.tp_rank == 0:
            conn.send(result)

    def run_batch(self, batch: ForwardBatch, max_new_tokens: int, paced: bool = False) -> dict:
        if self.tp_rank == 0:
            logger.info(
                f"Prefill batch, #new-seq: 1, #new-token: {len(batch.input_ids)}, #cached-token: 0, "
                f"token usage: {len(batch.input_ids) / self.max_total_num_tokens:.2f}, #running-req: 0, #queue-req: 0, "
            )
        start = time.monotonic()
        hidden_states = self.model_runner.forward(batch)
        output_ids = []
        for step in range(max_new_tokens):
            output_ids.append(self.model_runner.model.next_token(hidden_states, step))
            if not paced:  # a paced request gets its timing from the HTTP layer's layout model
                standin_sleep(0.002)
            if self.tp_rank == 0 and (step + 1) % DECODE_LOG_INTERVAL == 0:
                throughput = (step + 1) / max(time.monotonic() - start, 1e-6)
                logger.info(
                    f"Decode batch, #running-req: 1, #token: {len(batch.input_ids) + step + 1}, token usage: 0.00, "
                    f"cuda graph: {not self.server_args.disable_cuda_graph}, gen throughput (token/s): "
                    f"{throughput:.2f}, #queue-req: 0, "
                )
        return {"rid": batch.rid, "output_ids": output_ids, "prompt_tokens": len(batch.input_ids),
                "completion_tokens": len(output_ids), "cached_tokens": 0}


def run_scheduler_process(server_args: ServerArgs, tp_rank: int, conn):
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the launcher owns Ctrl-C and shutdown
    kill_itself_when_parent_died()
    prefix = f" TP{tp_rank}"
    if server_args.ep_size > 1:
        prefix += f" EP{tp_rank // (server_args.tp_size // server_args.ep_size)}"
    configure_logger(server_args.log_level, prefix=prefix)
    launcher_pid = os.getppid()
    try:
        scheduler = Scheduler(server_args, tp_rank)
        if tp_rank == server_args.tp_size // server_args.nnodes * server_args.node_rank:
            scheduler.internal_socket = open_internal_listener(server_args.port + INTERNAL_PORT_OFFSET)
        conn.send({"status": "ready", "max_total_num_tokens": scheduler.max_total_num_tokens,
                   "max_req_input_len": scheduler.model_config.context_len - 1,
                   "device_properties": scheduler.model_runner.device_properties})
        if server_args.disable_overlap_schedule:
            scheduler.event_loop_normal(conn)
        else:
            scheduler.event_loop_overlap(conn)
    except EOFError:
        return  # the launcher closed the pipe: it is shutting down
    except Exception:
        logger.error(f"Scheduler hit an exception: {traceback.format_exc()}")
        if os.getppid() == launcher_pid:  # never signal whoever adopted us
            os.kill(launcher_pid, signal.SIGQUIT)
