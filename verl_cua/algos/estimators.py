"""The advantage estimators verl-cua adds, listed once: what each adds to GRPO's outcome advantage, where verl's
registration of it lives, and the papers behind it. The verl plug-in (its registrations and `verl-cua list`), the
start-up plan, the config checks and the recipe export all read this table. Pure Python.

A row's `step_advantage` names the step hook that follows GRPO's outcome advantage: the folder
`verl_cua/integrations/verl/<step_advantage>/`, whose `HOOK` the estimator plan runs, and the `cua.<step_advantage>`
section of its settings."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Paper:
    """A paper as an exported recipe's README names it: what it is to the recipe, its title and arXiv id."""

    key: str
    label: str
    title: str
    arxiv: str


SDPO_PAPER = Paper("sdpo", "SDPO", "Reinforcement Learning via Self-Distillation", "2601.20802")
GIGPO_PAPER = Paper("gigpo", "GiGPO", "Group-in-Group Policy Optimization for LLM Agent Training", "2505.10978")
GRPO_PAPER = Paper(
    "deepseekmath",
    "GRPO (verl's own estimator), from DeepSeekMath",
    "DeepSeekMath: Pushing the Limits of Mathematical Reasoning in Open Language Models",
    "2402.03300",
)


@dataclass(frozen=True)
class Estimator:
    """What one of our estimators adds to verl's step (after GRPO's outcome advantage)."""

    step_advantage: str  # its step hook: "sdpo" (the teacher's signal) or "gigpo" (step anchors)
    module: str = "estimator"  # the module of integrations/verl/<step_advantage>/ that registers it with verl
    grpo_mix: bool = False  # the advantage mixes GRPO's back in (`cua.sdpo.grpo_lambda`)
    own_loss: bool = True  # SDPO's loss follows `cua.sdpo.loss`; False: always the token-level loss
    papers: tuple[Paper, ...] = ()  # what an exported recipe cites for it


ESTIMATORS: dict[str, Estimator] = {
    "sdpo": Estimator("sdpo", papers=(SDPO_PAPER,)),
    "sdpo_grpo": Estimator("sdpo", "sdpo_grpo", grpo_mix=True, own_loss=False, papers=(SDPO_PAPER, GRPO_PAPER)),
    "gigpo": Estimator("gigpo", papers=(GIGPO_PAPER,)),
}
VERL_PAPERS: dict[str, tuple[Paper, ...]] = {"grpo": (GRPO_PAPER,)}  # verl's own estimators that recipes use


def estimator_papers(estimator: str) -> tuple[Paper, ...]:
    """The papers behind `estimator`, ours or verl's (none for an estimator we know nothing of)."""
    ours = ESTIMATORS.get(estimator)
    return ours.papers if ours is not None else VERL_PAPERS.get(estimator, ())


def estimators_using(step_advantage: str) -> tuple[str, ...]:
    """Our estimators whose step hook is `step_advantage` (the ones a `cua.<step_advantage>` setting needs)."""
    return tuple(name for name, e in ESTIMATORS.items() if e.step_advantage == step_advantage)


def step_advantages() -> tuple[str, ...]:
    """The step hooks our estimators use, each once, in the table's order."""
    return tuple(dict.fromkeys(e.step_advantage for e in ESTIMATORS.values()))
