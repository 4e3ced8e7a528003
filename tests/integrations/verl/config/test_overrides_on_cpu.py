"""A `cua.*` key the schema lacks, named on the command line, is one line with the closest valid keys and exit 2,
before Hydra composes anything (Hydra's own refusal is 7 lines advising `+`); keys under a mapping field are free;
every other key is Hydra's to judge."""

import subprocess
import sys

import pytest

from verl_cua import main as entry
from verl_cua.integrations.verl.config.fields import CuaConfigError
from verl_cua.integrations.verl.config.overrides import check_cua_overrides, override_key, schema_keys
from verl_cua.integrations.verl.config.schema import CuaConfig


@pytest.mark.parametrize(
    ("arg", "key"),
    [("cua.env.name=x", "cua.env.name"), ("+cua.env.nmae=x", "cua.env.nmae"), ("++cua.a=1", "cua.a"),
     ("~cua.sdpo.topk", "cua.sdpo.topk"), ("~cua.b=2", "cua.b"), ("--cfg", None), ("-m", None)],
)  # fmt: skip
def test_the_key_of_each_override_form(arg, key):
    assert override_key(arg) == key


@pytest.mark.parametrize("prefix", ["", "+", "++", "~"])
def test_an_unknown_key_names_the_closest_valid_ones(prefix):
    with pytest.raises(CuaConfigError) as exc:
        check_cua_overrides(["preset=cpu", f"{prefix}cua.env.nmae=x"])
    assert str(exc.value).startswith("unknown key cua.env.nmae; closest: cua.env.name")
    assert "\n" not in str(exc.value)


def test_close_keys_of_other_sections_and_sections_themselves():
    with pytest.raises(CuaConfigError, match=r"^unknown key cua\.evn\.name; closest: cua\.env\.name"):
        check_cua_overrides(["cua.evn.name=x"])
    with pytest.raises(CuaConfigError, match=r"^unknown key cua\.sdpoo; closest: cua\.sdpo"):
        check_cua_overrides(["cua.sdpoo={}"])
    with pytest.raises(CuaConfigError, match=r"closest: cua\.env\.max_steps"):
        check_cua_overrides(["cua.env.max_steps.x=1"])  # a plain field has no sub-keys


def test_every_schema_key_and_mapping_sub_keys_pass():
    args = [f"{key}=1" for key in schema_keys()]
    assert len(args) == sum(1 + len(section) for section in CuaConfig().values())  # every section and field
    check_cua_overrides(args)
    free = [key for key, takes_any in schema_keys().items() if takes_any]
    assert free == ["cua.env.kwargs", "cua.executor.extra_body"]  # the mapping fields: make_env's, the request's
    check_cua_overrides(["+cua.env.kwargs.provider=docker", "++cua.env.kwargs.a.b=1", "~cua.env.kwargs.x", "cua=x"])


def test_other_keys_are_left_to_hydra():
    check_cua_overrides(["cuax.y=1", "data.train_batch_size=-4", "hydra.run.dir=/tmp/x", "--cfg", "job"])


def test_a_host_that_reads_one_section_lists_its_keys():
    check_cua_overrides(["+cua.preflight.resource_timeout=5"], sections=("preflight",))
    with pytest.raises(CuaConfigError) as exc:
        check_cua_overrides(["+cua.env.name=x"], sections=("preflight",))
    assert str(exc.value) == (
        "unknown key cua.env.name; this trainer reads cua.preflight.skip, cua.preflight.resource_timeout"
    )


def test_main_refuses_before_hydra(monkeypatch, capsys):
    import hydra

    def never(*args, **kwargs):
        raise AssertionError("Hydra was reached")

    monkeypatch.setattr(hydra, "main", never)
    monkeypatch.setattr(sys, "argv", ["verl_cua.main", "preset=cpu", "cua.env.nmae=x"])
    with pytest.raises(SystemExit) as exc:
        entry.main()
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["verl-cua: unknown key cua.env.nmae; closest: cua.env.name, cua.env.max_steps, "
                                "cua.env.max_pixels"]  # fmt: skip


@pytest.mark.e2e
def test_python_m_main_names_the_closest_keys_in_one_line():
    proc = subprocess.run([sys.executable, "-m", "verl_cua.main", "preset=cpu", "cua.env.nmae=x"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.splitlines() == ["verl-cua: unknown key cua.env.nmae; closest: cua.env.name, cua.env.max_steps, "
                                        "cua.env.max_pixels"]  # fmt: skip
    assert "To append to your config use +" not in proc.stderr  # Hydra's advice: never reached
