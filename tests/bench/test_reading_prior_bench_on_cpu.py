"""`python -m bench.reading_prior` at its smallest (the tiny random model, two pages): the ranks, counts and chance
hold together, and the control's instruction names no word; the helpers on their own."""

import json

from bench.reading_prior import instruction, pages, rank, summary


def test_the_control_names_no_word_and_the_pages_quote_one_of_their_buttons():
    assert instruction("ok", True) == 'Click on the "ok" button.' and '"' not in instruction("ok", False)
    for words, target in pages(50, seed=3):
        assert 3 <= len(words) <= 5 and len(set(words)) == len(words) and target in words
    assert pages(5, seed=1) == pages(5, seed=1) != pages(5, seed=2)


def test_rank_and_summary():
    assert rank({"a": 1.0, "b": 3.0, "c": 2.0}, "a") == 2 and rank({"a": 1.0, "b": 3.0}, "b") == 0
    s = summary({"quoted": [0, 1, 0], "control": [2, 0, 1], "buttons": [3, 4, 3]})
    assert (s["pages"], s["quoted_first"], s["control_first"]) == (3, 2, 1)
    assert abs(s["chance_first"] - (1 / 3 + 1 / 4 + 1 / 3)) < 1e-9 and abs(s["chance_mean_rank"] - 3.5 / 3) < 1e-9


def test_the_bench_on_two_pages(tmp_path, capsys):
    from bench.reading_prior import main
    from verl_cua.testing.tiny_models import build_tiny_model

    out = tmp_path / "prior.json"
    assert main(["--model", str(build_tiny_model("qwen25vl")), "--pages", "2", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert len(result["quoted"]) == len(result["control"]) == 2
    assert all(
        0 <= r < b for name in ("quoted", "control") for r, b in zip(result[name], result["buttons"], strict=True)
    )
    assert result["summary"]["quoted_first"] == sum(r == 0 for r in result["quoted"])
    assert "2 synthetic som pages" in capsys.readouterr().out
