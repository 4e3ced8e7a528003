"""`cua.gigpo` and `algorithm.adv_estimator=gigpo`: the registered estimator (`estimator`) and its inputs gathered from
the agent loop's rows (`advantage`). The math is `verl_cua.algos.gigpo`; `HOOK` is this folder's step hook
(`advantage.apply`: GiGPO's advantages replace GRPO's; no per-row loss fields)."""

from verl_cua.integrations.verl.hooks import StepHook

HOOK = StepHook(name="gigpo", section="gigpo", step=f"{__name__}.advantage:apply")
