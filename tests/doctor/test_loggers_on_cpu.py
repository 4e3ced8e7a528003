"""The loggers' check: every `trainer.logger` backend verl starts minutes into a run is checked before it starts, for
its package and its credentials (wandb's API key, netrc entry or offline mode), in one line with the fix."""

import io
import socket
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from verl_cua.doctor import loggers
from verl_cua.doctor.loggers import VERL_LOGGERS, logger_findings, logger_names, swanlab_finding, vemlp_finding
from verl_cua.doctor.preflight import main as preflight_main

WANDB_VARS = ("WANDB_API_KEY", "WANDB_MODE", "WANDB_BASE_URL", "WANDB_IDENTITY_TOKEN_FILE", "NETRC")


@pytest.fixture
def bare_home(tmp_path, monkeypatch):
    """A HOME with no netrc and no logger variables set."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var in WANDB_VARS:
        monkeypatch.delenv(var, raising=False)
    return home


@pytest.fixture(autouse=True)
def wandb_server_answers(monkeypatch):
    """FAKE reachability for the credential tests (api.wandb.ai cannot be reached from CI); the probe itself is
    tested against loopback servers below."""
    monkeypatch.setattr(loggers, "_unreachable", lambda url: None)


def _wandb(host="verl", logger="[console,wandb]"):
    found = {f.check: f for f in logger_findings({"trainer": {"logger": logger}}, host)}
    return found.get("wandb")


def test_wandb_without_credentials_is_a_blocker_naming_every_fix(bare_home):
    finding = _wandb()
    assert finding.level == "FAIL" and "\n" not in finding.detail
    assert "no credentials for api.wandb.ai" in finding.detail and str(bare_home / ".netrc") in finding.detail
    for fix in ("`wandb login`", "export WANDB_API_KEY=", "WANDB_MODE=offline", "drop wandb from trainer.logger"):
        assert fix in finding.detail, fix
    assert _wandb(logger=["console"]) is None and _wandb(logger="[console,file]") is None


def test_wandb_credentials_from_the_key_a_netrc_for_its_host_or_an_offline_mode(bare_home, tmp_path, monkeypatch):
    (bare_home / ".netrc").write_text("machine api.wandb.ai\n  login user\n  password abc123\n")
    assert _wandb().level == "ok" and "api.wandb.ai" in _wandb().detail
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.com:8443")  # a netrc entry for another host
    assert _wandb().level == "FAIL" and "wandb.example.com:8443" in _wandb().detail
    other = tmp_path / "netrc"
    other.write_text("machine wandb.example.com:8443 login user password xyz\n")
    monkeypatch.setenv("NETRC", str(other))  # wandb reads $NETRC before ~/.netrc
    assert _wandb().level == "ok" and str(other) in _wandb().detail
    monkeypatch.setenv("NETRC", str(tmp_path / "absent"))
    assert _wandb().level == "FAIL"
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert _wandb().level == "ok" and "WANDB_API_KEY" in _wandb().detail
    monkeypatch.delenv("WANDB_API_KEY")
    for mode in ("offline", "disabled", "dryrun"):
        monkeypatch.setenv("WANDB_MODE", mode)
        assert _wandb(logger="[console,tracking]").level == "ok"  # verl's deprecated alias of wandb
    monkeypatch.setenv("WANDB_MODE", "online")
    assert _wandb().level == "FAIL"


def test_a_logger_whose_package_is_absent_names_its_install(bare_home, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # find_spec answers None: not installed
    finding = _wandb()
    assert finding.level == "FAIL" and "wandb is not installed: pip install wandb" in finding.detail


def test_unknown_logger_names_are_a_blocker_listing_verls(bare_home):
    from verl.utils.tracking import Tracking

    assert set(VERL_LOGGERS) == set(Tracking.supported_backend)  # the list verl 0.9.1 asserts on, minutes in
    (finding,) = logger_findings({"trainer": {"logger": "[console,wandbb]"}})
    assert finding.level == "FAIL" and finding.check == "logger" and "names wandbb" in finding.detail
    assert "valid: wandb, mlflow" in finding.detail
    assert logger_findings({"trainer": {"logger": ["console", "wandbb"]}}, host="verl-agent") == []
    assert logger_names("['console', \"file\"]") == ["console", "file"] and logger_names(None) == []


def test_swanlab_and_volcengine_need_their_keys(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    for var in ("SWANLAB_MODE", "SWANLAB_API_KEY", "SWANLAB_SAVE_DIR", "VOLC_ACCESS_KEY_ID", "MLP_TRACKING_REGION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SWANLAB_ROOT", str(tmp_path / "swanlab"))
    assert swanlab_finding().level == "FAIL" and "`swanlab login`" in swanlab_finding().detail
    (tmp_path / "swanlab").mkdir()
    (tmp_path / "swanlab" / ".netrc").write_text("machine https://api.swanlab.cn login user password key\n")
    assert swanlab_finding().level == "ok"
    monkeypatch.setenv("VOLC_SECRET_ACCESS_KEY", "s")
    finding = vemlp_finding()
    assert finding.level == "FAIL" and "VOLC_ACCESS_KEY_ID and MLP_TRACKING_REGION unset" in finding.detail


def test_the_recipes_preflight_reads_logger_and_stops_in_one_line(bare_home, tmp_path, monkeypatch, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    args = ["--gpus", "0", "--model", str(model), "--prog", "recipe.sh", "--logger", "[console,wandb]"]
    assert preflight_main(args) == 1
    lines = capsys.readouterr().err.splitlines()
    assert lines[0].startswith("recipe.sh: wandb: no credentials for api.wandb.ai") and len(lines) == 2
    assert preflight_main([*args, "--", "trainer.logger=[console,file]"]) == 0  # an appended override wins
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert preflight_main(args) == 0


def test_the_doctor_names_the_wandb_blocker_of_the_flagship(bare_home):
    from verl_cua.doctor import run_doctor

    out = io.StringIO()
    run_doctor(str(Path(__file__).resolve().parents[2] / "recipes" / "run_qwen3vl_sdpo_osworld.sh"), [], out=out)
    (line,) = [line for line in out.getvalue().splitlines() if line.startswith("FAIL  wandb: ")]
    assert "`wandb login`" in line


def test_online_wandb_whose_server_does_not_answer_is_a_blocker_naming_offline_mode(bare_home, monkeypatch):
    """The real probe (`_unreachable`, undone from the fixture) against loopback: a closed port fails in one line
    naming WANDB_MODE=offline, a server that answers (with any status) passes, and offline mode probes nothing."""
    monkeypatch.undo()  # the fixture's fake and bare_home's variables; set again below
    monkeypatch.setenv("HOME", str(bare_home))
    for var in ("WANDB_MODE", "WANDB_IDENTITY_TOKEN_FILE", "NETRC"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    with socket.socket() as s:  # a loopback port nothing listens on
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed}")
    finding = _wandb()
    assert finding.level == "FAIL" and "\n" not in finding.detail
    assert f"http://127.0.0.1:{closed} did not answer" in finding.detail and "WANDB_MODE=offline" in finding.detail

    class NotFound(BaseHTTPRequestHandler):
        def do_HEAD(self):
            self.send_response(404)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), NotFound)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{server.server_address[1]}")
        assert _wandb().level == "ok" and "answers" in _wandb().detail
    finally:
        server.shutdown()
        server.server_close()
    monkeypatch.setenv("WANDB_BASE_URL", f"http://127.0.0.1:{closed}")
    monkeypatch.setenv("WANDB_MODE", "offline")
    assert _wandb().level == "ok"
