"""`cua.gigpo` and `algorithm.adv_estimator=gigpo`: the registered estimator (`estimator`) and its inputs gathered from
the agent loop's rows (`advantage`)."""
