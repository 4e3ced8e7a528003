"""`cua.coso`: CoSo's entropy bonus on the tokens that cause the parsed action, beside any estimator with PPO's loss.
The agent loop computes each turn's causal weights (`weights`, a turn hook), the driver writes them as a per-row loss
field (`fields`, the step hook's `apply`), and the actor loss adds the weighted entropy bonus to PPO's (`loss`). The
math is `verl_cua.algos.coso`."""

from verl_cua.integrations.verl.hooks import StepHook

WEIGHT = "cua_coso_weight"  # per row [response_len]: CoSo's causal weight B of each model token (0 elsewhere)

HOOK = StepHook(
    name="coso",
    section="coso",
    step=f"{__name__}.fields:apply",
    row_fields=(WEIGHT,),
    loss=f"{__name__}.loss:entropy_bonus",
    entropy=True,  # the bonus is -coef * agg(B * H): the update's per-token entropy H
    turns=f"{__name__}.weights:CosoWeights",
)
