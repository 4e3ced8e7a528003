"""verl-cua's advantage estimators and policy loss, registered in verl's registries on import:
`algorithm.adv_estimator=sdpo|sdpo_grpo|gigpo`, `actor.policy_loss.loss_mode=sdpo`."""

from verl_cua.integrations.verl.estimators import gigpo, sdpo, sdpo_grpo, sdpo_loss  # noqa: F401

ESTIMATORS = ("sdpo", "sdpo_grpo", "gigpo")
