"""M-RoPE position ids packed the way TransferQueue packs them come back row for row through verl's worker paths
(the checked `maybe_fix_3d_position_ids`, `make_iterator`, `chunk_tensordict`); verl's own fix loses them when
every row has the same length or the batch is one row (a long run crashed at step 39 on it)."""

import subprocess
import sys
import textwrap

import pytest
import torch
from tensordict import TensorDict
from verl.utils import tensordict_utils as tu

from verl_cua.integrations.verl.fixes.position_ids import checked_fix_3d_position_ids

CHANNELS = 4  # verl's Qwen-VL position ids: text + 3 M-RoPE channels


def _rows(lengths: list[int]) -> list[torch.Tensor]:
    """Distinct (C, L) position ids per row, so any mix-up of rows or tokens shows."""
    return [torch.arange(CHANNELS * n).reshape(CHANNELS, n) + 1000 * i for i, n in enumerate(lengths)]


def _packed(lengths: list[int]) -> tuple[TensorDict, list[torch.Tensor]]:
    """A batch as TransferQueue's storage hands it to a worker: every field `as_nested_tensor(rows, jagged)`."""
    rows = _rows(lengths)
    ids = [torch.arange(n) for n in lengths]
    td = TensorDict(
        {
            "position_ids": torch.nested.as_nested_tensor(rows, layout=torch.jagged),
            "input_ids": torch.nested.as_nested_tensor(ids, layout=torch.jagged),
        },
        batch_size=[len(lengths)],
    )
    return td, rows


def _rows_back(td: TensorDict) -> list[torch.Tensor]:
    return list(td["position_ids"].unbind())


CASES = {
    "16 rows of one length": [37] * 16,
    "one row": [53],
    "mixed lengths": [11, 40, 23, 40, 7, 18, 40, 29],
    "two rows of one length": [4 * CHANNELS] * 2,
}


@pytest.mark.parametrize("lengths", CASES.values(), ids=CASES.keys())
def test_every_row_comes_back_through_the_fix_make_iterator_and_chunks(lengths):
    td, rows = _packed(lengths)
    checked_fix_3d_position_ids(td)
    assert all(torch.equal(a, b) for a, b in zip(_rows_back(td), rows, strict=True))
    assert td["position_ids"].values().shape == (CHANNELS, sum(lengths))

    mini = max(1, len(lengths) // 2) if len(lengths) % 2 == 0 else len(lengths)
    seen = []
    for batch in tu.make_iterator(td, mini_batch_size=mini, epochs=1, seed=0, dataloader_kwargs={"shuffle": False}):
        checked_fix_3d_position_ids(batch)  # verl calls it again on every mini-batch
        seen += _rows_back(batch)
    assert all(torch.equal(a, b) for a, b in zip(seen, rows, strict=True))

    chunks = tu.chunk_tensordict(td, len(lengths) if len(lengths) % 2 else 2)
    chunked = [row for chunk in chunks for row in _rows_back(chunk)]
    assert all(torch.equal(a, b) for a, b in zip(chunked, rows, strict=True))


def test_a_right_layout_is_left_as_it_is():
    td, rows = _packed([5, 9, 12])
    storage = td["position_ids"].values().data_ptr()
    checked_fix_3d_position_ids(td)
    assert td["position_ids"].values().data_ptr() == storage and td["position_ids"]._ragged_idx == 2
    assert all(torch.equal(a, b) for a, b in zip(_rows_back(td), rows, strict=True))


@pytest.mark.parametrize("lengths", [[37] * 16, [53]], ids=["same length", "one row"])
def test_verl_s_own_fix_loses_these_rows(lengths):
    """The negative control: without our check the rows are lost (so the cases above can fail)."""
    td, rows = _packed(lengths)
    original = tu.maybe_fix_3d_position_ids
    if original is checked_fix_3d_position_ids:  # the plug-in replaced it in this process: verl's body, by hand
        td["position_ids"]._ragged_idx = 2
    else:
        original(td)
    try:
        back = list(tu.chunk_tensordict(td, 1)[0]["position_ids"].unbind())
    except RuntimeError:  # split_with_sizes: the crash of update_actor
        return
    assert not all(torch.equal(a, b) for a, b in zip(back, rows, strict=True))  # the silent error of compute_log_prob


def test_the_plugin_installs_the_fix_where_verl_s_workers_look_it_up():
    script = """
        import verl
        import verl.workers.engine.base as base
        import verl.workers.engine_workers as workers
        from verl.utils import tensordict_utils
        from verl_cua.integrations.verl.fixes.position_ids import checked_fix_3d_position_ids as fix
        print([m.maybe_fix_3d_position_ids is fix for m in (base, workers, tensordict_utils)])
        """
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.strip().splitlines()[-1] == "[True, True, True]"
