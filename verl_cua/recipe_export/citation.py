"""The papers behind our estimators (listed with them, `verl_cua.algos.estimators`) and Entropulse, as the exported
README cites them: a line with the arXiv link for the Algorithm section, and BibTeX entries for verl-cua and the
recipe's estimator for its Citation section. Only papers our own docs cite (docs/algorithms.md); authors are left to
the arXiv pages rather than guessed."""

from __future__ import annotations

from verl_cua.algos.estimators import Paper, estimator_papers
from verl_cua.resources import DIST

ARXIV = "https://arxiv.org/abs/{}"
HOME = "https://github.com/verl-cua/verl-cua"  # pyproject's Homepage (a placeholder until the public home)
ENTROPULSE = f"Entropulse, from ComputerRL, arXiv:[2508.14040]({ARXIV.format('2508.14040')})"


def paper_line(paper: Paper) -> str:
    """`SDPO, "Title", arXiv:[id](link)`."""
    return f'{paper.label}, "{paper.title}", arXiv:[{paper.arxiv}]({ARXIV.format(paper.arxiv)})'


def paper_bibtex(paper: Paper) -> str:
    """A BibTeX @misc entry (title, year, arXiv id and address)."""
    year = 2000 + int(paper.arxiv[:2])
    return "\n".join([
        f"@misc{{{paper.key}{year},",
        f"  title = {{{paper.title}}},",
        f"  year = {{{year}}},",
        f"  eprint = {{{paper.arxiv}}},",
        "  archivePrefix = {arXiv},",
        f"  url = {{{ARXIV.format(paper.arxiv)}}},",
        "}",
    ])  # fmt: skip


def verl_cua_bibtex(version: str) -> str:
    """A BibTeX @software entry for verl-cua at `version`."""
    return "\n".join([
        "@software{verl_cua,",
        f"  title = {{{DIST}: computer-use agents for verl and verl-agent}},",
        "  author = {{verl-cua contributors}},",
        f"  version = {{{version}}},",
        f"  url = {{{HOME}}},",
        "}",
    ])  # fmt: skip


def citation_section(estimator: str, version: str) -> list[str]:
    """The README's Citation section: verl-cua, then the estimator's papers."""
    entries = [verl_cua_bibtex(version), *(paper_bibtex(p) for p in estimator_papers(estimator))]
    intro = "If you use this recipe, please cite verl-cua"
    intro += " and the paper(s) of its estimator (authors as on each arXiv page):" if len(entries) > 1 else ":"
    return ["## Citation", "", intro, "", "```bibtex", "\n\n".join(entries), "```", ""]
