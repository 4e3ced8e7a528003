"""The papers behind our estimators and Entropulse, as the exported README cites them: a line with the arXiv link
for the Algorithm section, and BibTeX entries for verl-cua and the recipe's estimator for its Citation section.
Only papers our own docs cite (docs/algorithms.md); authors are left to the arXiv pages rather than guessed."""

from __future__ import annotations

from dataclasses import dataclass

from verl_cua.resources import DIST

ARXIV = "https://arxiv.org/abs/{}"
HOME = "https://github.com/verl-cua/verl-cua"  # pyproject's Homepage (a placeholder until the public home)


@dataclass(frozen=True)
class Paper:
    """A paper as the README names it: what it is to this recipe, its title and arXiv id."""

    key: str
    label: str
    title: str
    arxiv: str

    def line(self) -> str:
        """`SDPO, "Title", arXiv:[id](link)`."""
        return f'{self.label}, "{self.title}", arXiv:[{self.arxiv}]({ARXIV.format(self.arxiv)})'

    def bibtex(self) -> str:
        """A BibTeX @misc entry (title, year, arXiv id and address)."""
        year = 2000 + int(self.arxiv[:2])
        return "\n".join([
            f"@misc{{{self.key}{year},",
            f"  title = {{{self.title}}},",
            f"  year = {{{year}}},",
            f"  eprint = {{{self.arxiv}}},",
            "  archivePrefix = {arXiv},",
            f"  url = {{{ARXIV.format(self.arxiv)}}},",
            "}",
        ])  # fmt: skip


PAPERS = {
    "sdpo": Paper("sdpo", "SDPO", "Reinforcement Learning via Self-Distillation", "2601.20802"),
    "gigpo": Paper("gigpo", "GiGPO", "Group-in-Group Policy Optimization for LLM Agent Training", "2505.10978"),
    "grpo": Paper("deepseekmath", "GRPO (verl's own estimator), from DeepSeekMath",
                  "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models", "2402.03300"),
}  # fmt: skip
ENTROPULSE = f"Entropulse, from ComputerRL, arXiv:[2508.14040]({ARXIV.format('2508.14040')})"
ESTIMATOR_PAPERS = {"sdpo": ["sdpo"], "sdpo_grpo": ["sdpo", "grpo"], "gigpo": ["gigpo"], "grpo": ["grpo"]}


def estimator_papers(estimator: str) -> list[Paper]:
    """The papers behind `estimator` (none for an estimator of someone else's)."""
    return [PAPERS[key] for key in ESTIMATOR_PAPERS.get(estimator, [])]


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
    entries = [verl_cua_bibtex(version), *(p.bibtex() for p in estimator_papers(estimator))]
    intro = "If you use this recipe, please cite verl-cua"
    intro += " and the paper(s) of its estimator (authors as on each arXiv page):" if len(entries) > 1 else ":"
    return ["## Citation", "", intro, "", "```bibtex", "\n\n".join(entries), "```", ""]
