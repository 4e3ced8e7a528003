"""`cua.sdpo` and `algorithm.adv_estimator=sdpo|sdpo_grpo`: which rows the teacher reprompts (`plan`) with what context
(`context`), the teacher pass (`teacher_pass`), the advantages (`advantage`, through the registered `estimator` and
`sdpo_grpo`), the loss's per-row fields (`fields`, `logit`) and the actor loss (`loss`, `policy_loss`)."""
