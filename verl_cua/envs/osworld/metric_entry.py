"""The bounded metric child's entry (`python -m verl_cua.envs.osworld.metric_entry`; see `metric_child`): read the
pickled request from stdin, load OSWorld's metric, say `ready`, limit itself, run the metric, print one JSON line."""

from __future__ import annotations

import json
import os
import pickle
import sys

from verl_cua.envs.osworld.metric_child import READY


def main() -> None:
    """Read the request, load the metric, say `ready`, limit this process, run the metric, print one JSON line."""
    import resource

    request = sys.stdin.buffer.read()
    name, args, kwargs, limits = pickle.loads(request)  # noqa: S301 - from the parent, which is trusted
    from verl_cua.envs.osworld import evaluators  # ours, loaded before the limits: a failure here is ours

    evaluators.install()
    fn = evaluators.raw_metric(name)
    real_stdout = os.dup(1)
    os.write(real_stdout, READY)  # from here on, what goes wrong is the metric's, on the agent's file
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # what the metric prints goes nowhere: only our lines are read
    os.dup2(quiet, 2)
    try:
        answer = {"result": _plain(fn(*args, **kwargs))}
    except MemoryError:
        answer = {"error": f"over {limits.memory} bytes of memory", "limit": True}
    except BaseException as exc:  # the parent scores it 0 with this reason
        answer = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
    os.write(real_stdout, (json.dumps(answer) + "\n").encode())


def _plain(result):
    """A metric's result as JSON (numbers and bools as they are, anything else as a float)."""
    if result is None or isinstance(result, (bool, int, float)):
        return result
    return float(result)


if __name__ == "__main__":
    main()
