"""The HTML trajectory report rendered in real headless Chromium: rows, filters, overlays, escaping, embedding."""

import io
import json
import shutil
import time
from pathlib import Path

import pytest
from PIL import Image

from verl_cua.envs.trajectory import RESULT, TRAJECTORY, EpisodeWriter, read_run, step_record, write_json
from verl_cua.testing.viewer_runs import HOSTILE, act, write_episode, write_sample_runs
from verl_cua.viewer import build_report
from verl_cua.viewer.overlay import describe

PINK = (255, 45, 149)  # overlay.COLOURS["click"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return write_sample_runs(tmp_path_factory.mktemp("runs"))


@pytest.fixture(scope="module")
def report(runs, tmp_path_factory):
    return build_report(list(runs), tmp_path_factory.mktemp("out") / "report.html")


def open_page(driver, path: Path, anchor: str = "") -> None:
    driver.get(path.resolve().as_uri() + (f"#{anchor}" if anchor else ""))


def js(driver, script: str, *args):
    return driver.execute_script(script, *args)


def wait_images_loaded(driver, selector: str, timeout: float = 15.0) -> list[int]:
    """Scroll every image matching `selector` into view (they are lazy) until all have loaded; their widths."""
    deadline = time.monotonic() + timeout
    while True:
        widths = js(
            driver,
            "return Array.from(document.querySelectorAll(arguments[0])).map(i => {"
            " i.scrollIntoView({block: 'center'}); return i.complete ? i.naturalWidth : -1; });",
            selector,
        )
        if widths and all(w > 0 for w in widths):
            return widths
        assert time.monotonic() < deadline, f"images {selector} did not load: {widths}"
        time.sleep(0.1)


def visible_rows(driver) -> list[str]:
    return js(
        driver, "return Array.from(document.querySelectorAll('tr.task-row:not([hidden])')).map(r => r.dataset.task)"
    )


def test_action_summaries_are_short_and_exact():
    assert describe(act("click", x=960, y=540)) == "click(960, 540)"
    assert describe(act("type", text='say "hi"')) == 'type("say \\"hi\\"")'
    assert describe(act("key", keys=["ctrl", "s"])) == "key(ctrl+s)"
    assert describe(act("drag", x=10, y=10, x2=200, y2=300)) == "drag(10, 10 → 200, 300)"
    assert describe(act("drag", x2=200, y2=300)) == "drag(→ 200, 300)"
    assert describe(act("scroll", x=5, y=6, dy=-3, dx=2)) == "scroll(down 3, right 2 @ 5, 6)"
    assert describe(act("fail", text="cannot find it")) == 'fail("cannot find it")'
    assert describe(act("type", text="x" * 100), limit=10) == 'type("xxxxxxxxx…")'
    api = act("api", api="CalcTools.set_cell_value", args={"cell": "B7", "value": "=SUM(B2:B6)"})
    assert describe(api) == 'CalcTools.set_cell_value(cell="B7", value="=SUM(B2:B6)")'
    long = act("api", api="Agent.open_app", args={"app_name": "v" * 50})
    assert describe(long, limit=5) == 'Agent.open_app(app_name="vvvv…")'


def test_task_rows_carry_each_runs_status_mark(driver, report):
    open_page(driver, report)
    rows = js(
        driver,
        "return Array.from(document.querySelectorAll('tr.task-row')).map(r => [r.dataset.task, r.dataset.domain,"
        " r.dataset.statuses, Array.from(r.querySelectorAll('td.mark .sym')).map(s => s.textContent).join('')])",
    )
    assert rows == [
        ["calc/calc-chart", "calc", "failure,failure", "✗✗"],
        ["calc/calc-sum-column", "calc", "success,failure", "✓✗"],
        ["chrome/chrome-bookmark", "chrome", "failure,success", "✗✓"],
        ["chrome/chrome-search", "chrome", "infra_failure,success", "⚠✓"],
        ["writer/writer-bold", "writer", "success,success", "✓✓"],
        ["writer/writer-only-baseline", "writer", "failure,missing", "✗–"],
        ["writer/writer-unfinished", "writer", "failure,unfinished", "✗–"],
    ]
    mark = js(
        driver, "return document.querySelector('tr[data-task=\"writer/writer-only-baseline\"] td.mark').innerText"
    )
    assert "1 step" in mark and "0.25" in mark


def test_run_cards_leave_infra_failures_out_of_the_success_rate(driver, report):
    open_page(driver, report)
    cards = js(driver, "return Array.from(document.querySelectorAll('.run-card')).map(c => c.innerText)")
    assert len(cards) == 2
    assert cards[0].startswith("baseline") and "qwen3-vl-8b" in cards[0]
    assert "33.3%" in cards[0] and "2 / 6 scored" in cards[0] and "1 infra" in cards[0]  # 2 of 6, not 2 of 7
    assert "60.0%" in cards[1] and "3 / 5 scored" in cards[1] and "1 unfinished" in cards[1]


def test_filters_hide_rows(driver, report):
    open_page(driver, report)
    assert len(visible_rows(driver)) == 7
    driver.find_element("id", "f-disagree").click()
    assert visible_rows(driver) == ["calc/calc-sum-column", "chrome/chrome-bookmark"]
    assert js(driver, "return document.querySelector('tr[data-task=\"writer/writer-bold\"]').hidden") is True
    assert driver.find_element("id", "f-count").text == "2 of 7 tasks"
    driver.find_element("id", "f-disagree").click()
    driver.find_element("id", "f-failed").click()
    assert "writer/writer-bold" not in visible_rows(driver) and len(visible_rows(driver)) == 6
    driver.find_element("id", "f-failed").click()
    js(
        driver,
        "const s = document.getElementById('f-domain'); s.value = 'chrome'; s.dispatchEvent(new Event('change'))",
    )
    assert visible_rows(driver) == ["chrome/chrome-bookmark", "chrome/chrome-search"]
    js(driver, "const s = document.getElementById('f-domain'); s.value = ''; s.dispatchEvent(new Event('change'))")
    driver.find_element("id", "f-search").send_keys("BOLD")  # matches the instruction, case-insensitively
    assert visible_rows(driver) == ["writer/writer-bold"]


def test_clicking_a_row_opens_its_detail(driver, report):
    from selenium.webdriver.common.keys import Keys

    open_page(driver, report)
    assert (
        js(driver, "return document.querySelector('.task-detail[data-task=\"calc/calc-chart\"]').offsetParent") is None
    )
    driver.find_element("css selector", 'tr[data-task="calc/calc-chart"] td.instr').click()
    assert js(driver, "return location.hash") == "#task-calc-calc-chart"
    assert js(driver, "return document.querySelector('.task-detail[data-task=\"calc/calc-chart\"]').offsetParent")
    assert "current" in driver.find_element("css selector", 'tr[data-task="calc/calc-chart"]').get_attribute("class")
    driver.find_element("id", "f-disagree").click()  # j walks the rows the filters show: calc-sum-column, bookmark
    body = driver.find_element("tag name", "body")
    body.send_keys("j")
    assert js(driver, "return location.hash") == "#task-calc-calc-sum-column"
    body.send_keys("j")
    assert js(driver, "return location.hash") == "#task-chrome-chrome-bookmark"
    body.send_keys("k")
    assert js(driver, "return location.hash") == "#task-calc-calc-sum-column"
    body.send_keys(Keys.ESCAPE)
    assert js(driver, "return location.hash") == "#row-task-calc-calc-sum-column"


def test_detail_shows_both_runs_step_by_step_with_overlays(driver, report):
    open_page(driver, report, "task-calc-calc-sum-column")
    detail = '.task-detail[data-task="calc/calc-sum-column"]'
    heads = js(driver, f"return Array.from(document.querySelectorAll('{detail} .run-head')).map(h => h.innerText)")
    assert "baseline" in heads[0] and "success" in heads[0] and "candidate" in heads[1] and "failure" in heads[1]
    cells = js(
        driver,
        f"return Array.from(document.querySelectorAll('{detail} .cell')).map(c => [c.dataset.run, c.dataset.step || "
        "'end', c.classList.contains('empty'), c.querySelector('code') ? c.querySelector('code').textContent : null])",
    )
    assert cells == [
        ["0", "1", False, "click(960, 540)"],
        ["1", "1", False, "right_click(400, 300)"],
        ["0", "2", False, 'type("=SUM(A1:A9)"); key(ctrl+s)'],
        ["1", "2", False, "(no action)"],
        ["0", "3", False, "done()"],
        ["1", "3", True, None],  # the candidate stopped after 2 steps
        ["0", "end", False, None],
        ["1", "end", False, None],
    ]
    assert wait_images_loaded(driver, f"{detail} img") == [1920] * 7  # 3 + 2 steps, 2 final screenshots
    step1 = f'{detail} .cell[data-run="0"][data-step="1"]'
    svg = js(
        driver,
        f"const s = document.querySelector('{step1} svg.overlay'); return [s.getAttribute('viewBox'),"
        " s.getAttribute('preserveAspectRatio')]",
    )
    assert svg == ["0 0 1920 1080", "none"]
    ring = js(
        driver,
        f"const c = document.querySelector('{step1} circle.ov-ring'); return [c.getAttribute('cx'),"
        " c.getAttribute('cy')]",
    )
    assert ring == ["960", "540"]
    # the ring's on-page centre is the click's place in the displayed image
    geometry = js(
        driver,
        f"const c = document.querySelector('{step1} circle.ov-ring').getBoundingClientRect();"
        f"const i = document.querySelector('{step1} img').getBoundingClientRect();"
        "return [c.left + c.width / 2 - i.left, c.top + c.height / 2 - i.top, i.width, i.height]",
    )
    assert geometry[0] == pytest.approx(geometry[2] / 2, abs=1.5)
    assert geometry[1] == pytest.approx(geometry[3] / 2, abs=1.5)
    invalid = js(driver, f'return document.querySelector(\'{detail} .cell[data-run="1"][data-step="2"]\').innerText')
    assert "invalid" in invalid and "no action found in the output" in invalid
    stats = js(driver, f"return document.querySelector('{step1} .stats').innerText")
    assert "model 1.25 s" in stats and "1,500 → 40 tok" in stats
    final = js(driver, f"return document.querySelector('{detail} .cell.final[data-run=\"1\"]').innerText")
    assert "failure" in final and "end: max_steps" in final


def test_overlay_scales_to_the_action_space_not_the_image_pixels(driver, report):
    open_page(driver, report, "task-calc-calc-chart")
    step = '.task-detail[data-task="calc/calc-chart"] .cell[data-run="1"][data-step="1"]'
    assert wait_images_loaded(driver, f"{step} img") == [1280]  # a 1280x720 screenshot of a 1920x1080 screen
    found = js(
        driver,
        f"const c = document.querySelector('{step} svg.overlay circle').getBoundingClientRect();"
        f"const i = document.querySelector('{step} img').getBoundingClientRect();"
        "return [(c.left + c.width / 2 - i.left) / i.width, (c.top + c.height / 2 - i.top) / i.height,"
        f" document.querySelectorAll('{step} .ov-scroll polygon').length]",
    )
    assert found[0] == pytest.approx(0.5, abs=0.005) and found[1] == pytest.approx(0.5, abs=0.005)
    assert found[2] == 1  # the scroll's arrow head


def test_click_marker_is_painted_at_the_click_point(driver, report, tmp_path):
    open_page(driver, report, "task-calc-calc-sum-column")
    step = '.task-detail[data-task="calc/calc-sum-column"] .cell[data-run="0"][data-step="1"]'
    wait_images_loaded(driver, f"{step} img")
    rect = js(
        driver,
        f"const i = document.querySelector('{step} img'); i.scrollIntoView({{block: 'center'}});"
        "const r = i.getBoundingClientRect(); return [r.left, r.top, r.width, r.height, window.devicePixelRatio]",
    )
    time.sleep(0.3)
    png = driver.get_screenshot_as_png()
    (tmp_path / "report.png").write_bytes(png)
    shot = Image.open(io.BytesIO(png)).convert("RGB")
    left, top, width, height, ratio = rect

    def at(x: float, y: float) -> tuple[int, int]:  # a point of the 1920x1080 screen -> screenshot pixels
        return round((left + x / 1920 * width) * ratio), round((top + y / 1080 * height) * ratio)

    def pink_pixels(cx: int, cy: int, radius: int) -> int:
        box = [shot.getpixel((x, y)) for x in range(cx - radius, cx + radius) for y in range(cy - radius, cy + radius)]
        return sum(all(abs(p - q) < 40 for p, q in zip(pixel, PINK, strict=True)) for pixel in box)

    assert pink_pixels(*at(960, 540), radius=round(20 * ratio)) > 20
    assert pink_pixels(*at(300, 900), radius=round(20 * ratio)) == 0
    button = shot.getpixel(at(1040, 570))  # inside the blue button, off the marker: the screenshot is drawn
    assert button[2] > 150 and button[0] < 90, button


def test_hostile_model_text_is_rendered_as_text(driver, report):
    html = report.read_text(encoding="utf-8")
    # the page's script and one data element per task; the model's "</script>" and "<script>" are escaped
    assert html.count("<script") == html.count("</script") == 1 + 7 and HOSTILE not in html
    assert html.count('<script type="application/json" class="detail-data">') == 7
    open_page(driver, report, "task-calc-calc-sum-column")
    detail = '.task-detail[data-task="calc/calc-sum-column"]'
    step = f'{detail} .cell[data-run="0"][data-step="1"]'
    js(driver, f"document.querySelector('{step} details.raw').open = true")
    assert js(driver, f"return document.querySelector('{step} details.raw pre').textContent") == HOSTILE
    assert js(driver, f"return document.querySelectorAll('{detail} script').length") == 0
    assert js(driver, "return document.querySelectorAll('script:not(.detail-data)').length") == 1  # the page's own
    assert js(driver, "return document.querySelectorAll('img[src=\"x\"], img[onerror]').length") == 0
    assert HOSTILE.split(" and ")[0] in js(driver, "return document.body.innerText")


def test_embedded_report_stands_alone(driver, runs, tmp_path):
    out = build_report(list(runs), tmp_path / "shared" / "report.html", embed=True, title="Shared")
    moved = tmp_path / "elsewhere" / "report.html"
    moved.parent.mkdir()
    shutil.move(out, moved)
    html = moved.read_text(encoding="utf-8")
    episodes = [e for run in runs for e in read_run(run)[1].values()]
    shots = sum(len(e.steps) + bool(e.result) for e in episodes)  # every step's screenshot and the final ones
    assert ".png" not in html and html.count("data:image/jpeg;base64,") == shots == 34
    open_page(driver, moved, "task-calc-calc-chart")
    assert driver.title == "Shared"
    # downscaled to 1280 px wide; the 1280x720 screenshots keep their size
    assert wait_images_loaded(driver, '.task-detail[data-task="calc/calc-chart"] img') == [1280] * 4


def test_single_trace_run_without_run_json(driver, tmp_path):
    trace = tmp_path / "trace"
    ok = write_episode(trace, "step_000001/click-test/ab12cd34-0", [[act("click", x=10, y=10)]], "success", trace=True)
    write_episode(trace, "step_000002/click-test/ab12cd34-1", [[act("wait")], [act("fail")]], "failure", trace=True)
    lines = [json.loads(line) for line in (ok / TRAJECTORY).read_text().splitlines()]
    lines[0]["advantage"] = 0.75  # a step's own advantage wins over result.json's step_advantages
    (ok / TRAJECTORY).write_text("".join(json.dumps(line) + "\n" for line in lines))
    report = build_report([trace], tmp_path / "view")  # a directory: report.html inside it
    assert report == tmp_path / "view" / "report.html"
    open_page(driver, report, "group-0-step_000002-click-test-ab12cd34")
    rows = js(
        driver,
        "return Array.from(document.querySelectorAll('tr.task-row')).map(r => [r.dataset.task,"
        " r.dataset.domain, r.dataset.statuses, r.querySelectorAll('td.tid')[1].innerText])",
    )
    assert rows == [  # a training trace: one row per group (step, task, uid)
        ["0/step_000001/click-test/ab12cd34", "step 1", "success", "ab12cd34"],
        ["0/step_000002/click-test/ab12cd34", "step 2", "failure", "ab12cd34"],
    ]
    assert "trace" in js(driver, "return document.querySelector('.run-card h2').innerText")
    adv = js(driver, "return document.querySelectorAll('.task-detail:target .cell .stats b.neg').length")
    assert adv == 2  # both steps of the failed episode: advantage -0.5 from step_advantages
    open_page(driver, report, "group-0-step_000001-click-test-ab12cd34")
    assert (
        js(driver, "return document.querySelector('.task-detail:target .cell.step .stats b.pos').innerText") == "+0.75"
    )


def test_odd_episodes_and_paths_still_render(driver, tmp_path):
    run = tmp_path / "odd run"
    key = "web/task #1 ?&é"  # characters that must be quoted in the image URL and escaped in the page
    write_episode(run, key, [[act("click", x=960, y=540)]], "failure")
    writer = EpisodeWriter(run / "web" / "broken")  # unfinished: no result.json, odd step lines
    writer.step(step_record(step=1, screenshot=None, screen=None, action=None, valid=False, error="endpoint timed out"))
    writer.step(
        step_record(
            step=2,
            screenshot="../../escape.png",
            screen=[0, 0],
            action={"actions": [{"kind": "click", "x": "NaN", "y": None}, "not a dict"]},
            valid=True,
            reward="n/a",
            usage={"prompt_tokens": None},
        )
    )
    writer.close()
    bad = write_episode(run, "web/bad-status", [], "failure")  # a hand-edited result.json must not inject markup
    write_json(bad / RESULT, {"status": '"><b id="pwned">x</b>', "instruction": "<i id='pwned2'>"})
    (run / "web" / "empty").mkdir()
    (run / "web" / "empty" / TRAJECTORY).write_text("")
    report = build_report([run], tmp_path / "report.html")
    open_page(driver, report)
    assert visible_rows(driver) == ["web/bad-status", "web/broken", "web/empty", key]
    assert js(driver, "return document.querySelectorAll('#pwned, #pwned2').length") == 0
    open_page(driver, report, "task-web-bad-status")
    assert js(driver, "return document.querySelector('.task-detail:target .grid') !== null")
    assert js(driver, "return document.querySelectorAll('#pwned, #pwned2').length") == 0
    anchor = js(driver, "return document.querySelector('tr.task-row:last-child').dataset.detail")
    assert anchor == "task-web-task-1"
    open_page(driver, report, anchor)
    assert wait_images_loaded(driver, ".task-detail:target img") == [1920, 1920]
    open_page(driver, report, "task-web-broken")
    cells = js(
        driver, "return Array.from(document.querySelectorAll('.task-detail:target .cell')).map(c => c.innerText)"
    )
    assert "endpoint timed out" in cells[0] and "no screenshot" in cells[0]
    assert "click(?, ?)" in cells[1] and "screenshot missing" in cells[1]  # a path out of the episode is not followed
    assert "unfinished" in js(driver, "return document.querySelector('.task-detail:target .run-head').innerText")
