"""Advantage estimators and schedules: SDPO, GiGPO, hybrid, Entropulse (issue 5)."""
