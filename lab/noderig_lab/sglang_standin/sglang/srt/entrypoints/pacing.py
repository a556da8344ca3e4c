"""When the stand-in's streamed tokens arrive: a small, deterministic cost model per layout.

No GPU runs here, so benchmark clients would measure nothing but Python. Instead each
streamed request is paced by a decode step whose cost depends on the parallelism layout and
on how many requests are decoding at once (the batch), and each step emits the speculative
accept length's worth of tokens. The figures are invented but keep the shapes real users
see: more TP lowers the latency floor, EP makes a bigger batch cheaper, DP attention costs
latency at low concurrency and wins at high concurrency (sglang#2882), speculative decoding
trades step cost for tokens per step.
"""

import math
import threading
import time
from dataclasses import dataclass

# speculative algorithm -> (accept length, step floor factor, per-request factor)
SPECULATIVE_TABLE = {
    None: (1.0, 1.0, 1.0),
    "NGRAM": (1.6, 1.05, 1.2),
    "EAGLE": (2.6, 1.2, 1.5),
    "EAGLE3": (2.8, 1.2, 1.5),
    "DFLASH": (3.6, 1.25, 1.6),
    "DDTREE": (4.2, 1.3, 1.8),
}
# ms of a decode step at batch 1 and per extra request in the batch, for TP=1, EP=1.
STEP_FLOOR_MS, STEP_PER_REQUEST_MS = 28.0, 2.4
DP_ATTENTION = (2.0, 0.35)  # floor factor, per-request factor
PREFILL_US_PER_TOKEN = 30.0  # at TP=1


@dataclass(frozen=True)
class Costs:
    step_floor_ms: float
    step_per_request_ms: float
    prefill_us_per_token: float
    accept_length: float

    def step_seconds(self, running: int) -> float:
        return (self.step_floor_ms + self.step_per_request_ms * max(0, running - 1)) / 1000.0


def layout_costs(server_args) -> Costs:
    tp, ep = max(1, server_args.tp_size), max(1, server_args.ep_size)
    accept, floor_factor, request_factor = SPECULATIVE_TABLE.get(server_args.speculative_algorithm, (1.0, 1.0, 1.0))
    floor = STEP_FLOOR_MS / math.sqrt(tp) * floor_factor
    per_request = STEP_PER_REQUEST_MS / tp / math.sqrt(ep) * request_factor
    if server_args.enable_dp_attention:
        floor, per_request = floor * DP_ATTENTION[0], per_request * DP_ATTENTION[1]
    return Costs(floor, per_request, PREFILL_US_PER_TOKEN / tp, accept)


class Pacer:
    """Counts the requests decoding now and yields each one's token groups at their time."""

    def __init__(self, costs: Costs, time_scale: float = 1.0):
        self.costs, self.time_scale = costs, time_scale
        self._lock = threading.Lock()
        self.running = 0

    def _sleep(self, seconds: float) -> None:
        time.sleep(seconds * self.time_scale)

    def paced(self, prompt_tokens: int, output_ids: list):
        """Yield lists of output ids: the first after prefill and one step, then one list per
        decode step (accept length tokens each, carried over as a fraction)."""
        with self._lock:
            self.running += 1
        try:
            self._sleep(prompt_tokens * self.costs.prefill_us_per_token / 1e6)
            sent, credit = 0, 0.0
            while sent < len(output_ids):
                with self._lock:
                    running = self.running
                self._sleep(self.costs.step_seconds(running))
                credit += 1.0 if sent == 0 else self.costs.accept_length
                take = max(1, int(credit))
                credit -= take
                yield output_ids[sent:sent + take]
                sent += take
        finally:
            with self._lock:
                self.running -= 1
