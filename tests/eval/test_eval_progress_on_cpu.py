"""Eval's progress where stderr is not a terminal (a recipe's log): plain lines at every tenth of the tasks, with the
counts so far, instead of a bar that cannot redraw there; none when progress is off."""

from verl_cua.eval.progress import EvalProgress


def test_plain_lines_at_every_tenth_when_stderr_is_not_a_terminal(capsys):
    with EvalProgress(total=40, done=0, enabled=True) as bar:
        for i in range(40):
            bar.advance(f"t{i}", "success" if i % 4 == 0 else "failure")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "eval: 40 tasks to run"
    done = [int(line.split(": ")[1].split("/")[0]) for line in lines[1:]]
    assert done == [1] + [4 * k for k in range(1, 11)]  # the first result, then every tenth
    assert lines[-1].startswith("eval: 40/40 tasks, 10 successes, 30 failures, 0 infra failures, ")


def test_a_resumed_eval_counts_from_its_earlier_tasks_and_no_progress_prints_nothing(capsys):
    with EvalProgress(total=10, done=6, enabled=True) as bar:
        for i in range(4):
            bar.advance(f"t{i}", "success")
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "eval: 4 tasks to run (6 done earlier)"
    assert lines[-1].startswith("eval: 10/10 tasks, 4 successes")
    with EvalProgress(total=10, enabled=False) as bar:
        bar.advance("t", "success")
    assert capsys.readouterr().err == ""
