"""The docs site builds with `mkdocs build --strict` and has every nav page; README stays a landing page."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SETUP_COMMANDS = ("bash recipes/quickstart.sh", "bash tests/run.sh")
README_MAX_LINES = 150


def nav_pages(nav: list) -> list[str]:
    """Every page path (relative to docs_dir) in a mkdocs `nav` tree."""
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        if isinstance(value, list):
            pages += nav_pages(value)
        elif not str(value).startswith(("http://", "https://")):
            pages.append(str(value))
    return pages


def built_page(site: Path, page: str) -> Path:
    """Where mkdocs (use_directory_urls) writes a docs page: index.md -> index.html, a/b.md -> a/b/index.html."""
    stem = page.removesuffix(".md")
    if stem == "index" or stem.endswith("/index"):
        return site / f"{stem}.html"
    return site / stem / "index.html"


@pytest.fixture(scope="module")
def mkdocs_config() -> dict:
    """mkdocs.yml, read as plain YAML (it uses no custom tags)."""
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_nav_page_exists_in_docs_dir(mkdocs_config: dict):
    """Each page the nav names is a file under docs_dir (a missing one is what --strict would report)."""
    docs = ROOT / mkdocs_config["docs_dir"]
    missing = [page for page in nav_pages(mkdocs_config["nav"]) if not (docs / page).is_file()]
    assert not missing, f"nav pages missing from {docs}: {missing}"


def test_strict_build_succeeds_and_renders_every_nav_page(mkdocs_config: dict, tmp_path: Path):
    """`mkdocs build --strict` exits 0 (no broken link, anchor or missing include) and writes a page per nav entry."""
    pytest.importorskip("material", reason="mkdocs-material comes with the dev and docs extras")
    mkdocs = shutil.which("mkdocs", path=str(Path(sys.executable).parent)) or shutil.which("mkdocs")
    assert mkdocs, "mkdocs is not installed: pip install -e '.[docs]'"
    site = tmp_path / "site"
    run = subprocess.run(
        [mkdocs, "build", "--strict", "-d", str(site)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
        env={"NO_MKDOCS_2_WARNING": "1", "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin"},
    )
    assert run.returncode == 0, run.stdout + run.stderr
    pages = nav_pages(mkdocs_config["nav"])
    missing = [page for page in pages if not built_page(site, page).is_file()]
    assert not missing, f"built site lacks: {missing}"
    changelog = built_page(site, "changelog.md").read_text()
    assert "Unreleased" in changelog, "docs/changelog.md did not include CHANGELOG.md"


def test_readme_is_a_landing_page_with_the_two_setup_commands():
    """README.md stays short and keeps the set-up contract the tests and recipes rely on."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= README_MAX_LINES
    for command in SETUP_COMMANDS:
        assert command in readme, f"README.md lost the set-up command {command!r}"


def test_readme_opens_with_the_status_table_and_its_links_and_pictures_resolve():
    """The README's first section is the status table; every relative link and picture in it names a real file."""
    readme = (ROOT / "README.md").read_text()
    sections = re.findall(r"^## (.+)$", readme, flags=re.M)
    assert sections[0].startswith("Status"), sections
    assert "never run on GPUs" in readme
    assert re.search(r"!\[[^\]]+\]\(docs/images/\S+\.png\)", readme), "README.md shows no picture"
    targets = re.findall(r"\]\(((?!https?:)[^)#\s]+)(?:#[^)]*)?\)", readme)
    missing = [t for t in targets if not (ROOT / t).exists()]
    assert not missing, f"README.md links to missing files: {missing}"
