"""`python -m bench.memory --smoke`: both storages' rows built by verl's agent-loop worker code on the real processor,
stored field by field and read back by the teacher pass's fetch (the step's row fields, then whole rows for the
reprompted ones) with real teacher rows; the figures have the bench's shape and PNG rows are the smaller."""

import json
import math

from bench import memory

KEYS = {"storage", "episodes_built", "scaled_to", "rows_built", "image", "screens", "bytes_per_row",
        "transfer_queue_gb", "driver_peak_gb", "driver_measured_gb", "teacher_rows_built", "seconds"}  # fmt: skip


def test_the_smoke_run_builds_both_storages_and_reports_png_rows_smaller(capsys):
    assert memory.main(["--smoke"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    before, after = (json.loads(line) for line in lines[:2])
    rows = memory.SMOKE["episodes"] * memory.SMOKE["steps"]
    for result, storage in ((before, "pixel_values"), (after, "png")):
        assert set(result) == KEYS and result["storage"] == storage
        assert result["rows_built"] == result["teacher_rows_built"] == rows  # every failed row reprompted
        assert result["image"] == [640, 352]  # 640x360 under Qwen3-VL's 32-pixel grid
        assert all(math.isfinite(result[k]) and result[k] >= 0 for k in ("transfer_queue_gb", "driver_peak_gb"))
    # fp32 patches: 1200 of 16x16x3x2 floats per screenshot and up to 3 a row, against a few PNG bytes
    assert before["bytes_per_row"] > 1_000_000 and after["bytes_per_row"] < before["bytes_per_row"] / 5
    assert lines[-1].startswith("recipe-scale step: ") and lines[-1].endswith(" GB driver peak")
