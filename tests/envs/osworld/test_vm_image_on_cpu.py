"""The docker provider's VM image lands where VM_PATH says: desktop-env's own download goes to ./docker_vm_data
whatever the run names. desktop-env's real `get_vm_path` runs; its download is FAKE (no model hub here): it writes
the zip and unpacks it as upstream's does, into the folder it is given."""

import os
import zipfile

import pytest

manager = pytest.importorskip("desktop_env.providers.docker.manager")
from verl_cua.envs.osworld.vm_image import fetch_vm_image, main  # noqa: E402


@pytest.fixture
def fake_download(monkeypatch, tmp_path):
    folders = []

    def download(vms_dir):
        folders.append(vms_dir)
        os.makedirs(vms_dir, exist_ok=True)  # as upstream's does
        archive = f"{vms_dir}/{manager.DOWNLOADED_FILE_NAME}"
        with zipfile.ZipFile(archive, "w") as z:
            z.writestr("Ubuntu.qcow2", b"qcow2 image")
        with zipfile.ZipFile(archive) as z:
            z.extractall(vms_dir)

    monkeypatch.setattr(manager, "_download_vm", download)
    monkeypatch.chdir(tmp_path)
    return folders


def test_the_image_is_downloaded_into_vm_paths_folder_named_as_it_names_it(fake_download, tmp_path):
    target = tmp_path / "vms" / "osworld-ubuntu.qcow2"
    target.parent.mkdir()
    assert fetch_vm_image(target) == target and target.read_bytes() == b"qcow2 image"
    assert fake_download == [str(target.parent)] and manager.VMS_DIR == "./docker_vm_data"  # restored
    assert not (tmp_path / "docker_vm_data").exists() and sorted(p.name for p in target.parent.iterdir()) == [
        "osworld-ubuntu.qcow2"
    ]  # the zip is gone
    assert fetch_vm_image(target) == target and len(fake_download) == 1  # present: nothing downloaded


def test_the_cli_prints_the_path_or_one_line(fake_download, tmp_path, capsys):
    assert main(["--vm-path", str(tmp_path / "a" / "Ubuntu.qcow2")]) == 0
    assert capsys.readouterr().out.strip() == str(tmp_path / "a" / "Ubuntu.qcow2")
    (tmp_path / "file").write_text("not a folder")  # the image's folder cannot be made (even as root)
    code = main(["--vm-path", str(tmp_path / "file" / "sub" / "Ubuntu.qcow2")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("verl-cua vm image: ")


def test_an_image_another_config_uses_is_never_moved_and_a_truncated_zip_is_one_line(fake_download, tmp_path, capsys):
    shared = tmp_path / "vms" / "Ubuntu.qcow2"
    shared.parent.mkdir()
    shared.write_bytes(b"qcow2 image")  # the default VM_PATH's image, already there
    code = main(["--vm-path", str(shared.parent / "custom.qcow2")])
    assert code == 1 and shared.read_bytes() == b"qcow2 image" and not (shared.parent / "custom.qcow2").exists()
    assert "set VM_PATH=" in capsys.readouterr().err
    broken = tmp_path / "broken"

    def truncated(vms_dir):
        os.makedirs(vms_dir, exist_ok=True)
        with open(f"{vms_dir}/{manager.DOWNLOADED_FILE_NAME}", "wb") as f:
            f.write(b"PK\x03\x04 cut short")
        zipfile.ZipFile(f"{vms_dir}/{manager.DOWNLOADED_FILE_NAME}")  # as upstream's unpacking would

    manager._download_vm = truncated  # restored by fake_download's monkeypatch
    code = main(["--vm-path", str(broken / "Ubuntu.qcow2")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 1 and len(err) == 1 and err[0].startswith("verl-cua vm image: ")
