"""The bounded metric child's entry (`python -m verl_cua.envs.osworld.metric_entry`; see `metric_child`): limit
itself, read the pickled request from stdin, run OSWorld's metric in this process, print one JSON line."""

from __future__ import annotations

import json
import os
import pickle
import sys


def main() -> None:
    """Limit this process, read the request, run the metric, print one JSON line."""
    import resource

    request = sys.stdin.buffer.read()
    name, args, kwargs, limits = pickle.loads(request)  # noqa: S301 - from the parent, which is trusted
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory, limits.memory))
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 5))
    real_stdout = os.dup(1)
    quiet = os.open(os.devnull, os.O_WRONLY)
    os.dup2(quiet, 1)  # what the metric prints goes nowhere: only our one line is read (and our own start-up
    os.dup2(quiet, 2)  # errors, before this point, reach the parent on stderr)
    try:
        from verl_cua.envs.osworld import evaluators

        evaluators.install()
        fn = evaluators.raw_metric(name)
        result = fn(*args, **kwargs)
        answer = {"result": _plain(result)}
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
