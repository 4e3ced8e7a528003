"""Which rows the SDPO teacher reprompts and with what: demos from successful siblings, the row's own feedback."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from verl_cua.algos.sdpo import demo_sources
from verl_cua.algos.success_buffer import instance_of

if TYPE_CHECKING:
    from verl_cua.integrations.verl.config.schema import SdpoConfig


@dataclass
class RepromptPlan:
    """Per row: the demo's actions (or None), the feedback text used, and whether the teacher sees anything new."""

    demo_actions: list[list[str] | None]
    feedback: list[str]
    use_image: list[bool]
    reprompt: list[bool]
    success: list[bool]
    metrics: dict[str, float] = field(default_factory=dict)


def plan_reprompts(
    extra_fields: Sequence[Mapping[str, Any]],
    uids: Sequence[str],
    sessions: Sequence[Any],
    sdpo: SdpoConfig,
    buffer_demos: Mapping[str, Sequence[Sequence[str]]] | None = None,
) -> RepromptPlan:
    """Plan the teacher contexts of a batch under the `cua.sdpo` settings; episodes are (uid, session), so step rows
    share their episode's demo.

    A row whose group has no other success takes the newest buffered success of its task instance (`buffer_demos`:
    instance -> action lists from earlier steps, oldest first), unless that is its own trajectory."""
    n = len(extra_fields)
    infra = [bool(e.get("cua_infra_failure")) for e in extra_fields]
    success = [bool(e.get("cua_success")) and not bad for e, bad in zip(extra_fields, infra, strict=True)]
    episodes: dict[tuple[str, Any], int] = {}
    row_episode = [episodes.setdefault((str(u), s), len(episodes)) for u, s in zip(uids, sessions, strict=True)]
    first_row = {ep: row_episode.index(ep) for ep in range(len(episodes))}
    ep_groups = [str(uids[first_row[ep]]) for ep in range(len(episodes))]
    ep_success = [success[first_row[ep]] for ep in range(len(episodes))]
    ep_demo = demo_sources(ep_groups, ep_success, sdpo.dont_reprompt_on_self_success)

    demo_actions: list[list[str] | None] = []
    feedback: list[str] = []
    use_image: list[bool] = []
    reprompt: list[bool] = []
    from_buffer = 0
    for i in range(n):
        demo_ep = ep_demo[row_episode[i]] if sdpo.demo and not infra[i] else None
        demo = list(extra_fields[first_row[demo_ep]].get("cua_actions") or []) if demo_ep is not None else None
        if not demo and sdpo.demo and not infra[i] and buffer_demos:
            own = list(extra_fields[i].get("cua_actions") or [])
            pool = [list(d) for d in buffer_demos.get(instance_of(extra_fields[i]), ()) if list(d) != own]
            if pool:
                demo = pool[-1]
                from_buffer += 1
        # the environment's feedback (its text and the final screenshot), with a demo only when asked for
        env_feedback = not infra[i] and not (demo and sdpo.feedback_only_without_demo)
        text = str(extra_fields[i].get("cua_feedback") or "") if sdpo.feedback and env_feedback else ""
        if success[i]:
            text = ""  # a success's own verdict teaches nothing; its demo (another success) may
        has_new = bool(demo) or bool(text.strip())
        demo_actions.append(demo if demo else None)
        feedback.append(text)
        reprompt.append(has_new)
        shot = bool(extra_fields[i].get("cua_final_screenshot"))
        use_image.append(has_new and env_feedback and sdpo.final_screenshot and shot)

    groups: dict[str, list[int]] = {}
    for i, uid in enumerate(uids):
        if not infra[i]:
            groups.setdefault(str(uid), []).append(i)
    with_success = sum(1 for rows in groups.values() if any(success[i] for i in rows))
    no_signal = sum(1 for rows in groups.values() if not any(reprompt[i] for i in rows))
    valid = max(1, sum(1 for bad in infra if not bad))
    metrics = {
        "sdpo/reprompt_fraction": sum(reprompt) / valid,
        "sdpo/demo_fraction": sum(1 for d in demo_actions if d) / valid,
        "sdpo/buffer_demo_fraction": from_buffer / valid,
        "sdpo/feedback_fraction": sum(1 for f in feedback if f.strip()) / valid,
        "sdpo/success_group_fraction": with_success / max(1, len(groups)),
        "sdpo/no_signal_groups": float(no_signal),
    }
    return RepromptPlan(demo_actions, feedback, use_image, reprompt, success, metrics)
