"""`cua.sdpo` and `algorithm.adv_estimator=sdpo|sdpo_grpo`: which rows the teacher reprompts (`plan`) with what context
(`context`), the teacher pass (`teacher_pass`), the advantages (`advantage`, through the registered `estimator` and
`sdpo_grpo`), the loss's per-row fields (`fields`, `logit`) and the actor loss (`loss`, `policy_loss`). The math is
`verl_cua.algos.sdpo`; `HOOK` is this folder's step hook (`advantage.apply`), and the names of the per-row fields it
writes are declared here."""

from verl_cua.integrations.verl.hooks import StepHook

MASK = "cua_sdpo_mask"  # per row [response_len]: 1 on model tokens the SDPO term trains (reprompted rows)
IDS = "cua_sdpo_ids"  # per row [response_len, k]: the student's top-k ids (float32, exact below 2**24)
TEACHER = "cua_sdpo_teacher_logp"  # per row [response_len, k]: the teacher's log-probs at IDS

HOOK = StepHook(
    name="sdpo",
    section="sdpo",
    step=f"{__name__}.advantage:apply",
    teacher_pass=True,
    row_fields=(MASK, "loss_mask", IDS, TEACHER),  # loss_mask with normalize=reprompted, IDS/TEACHER with logit
)
