"""The trainer's rows: the per-step view of their fields (`step_fields`), TransferQueue and mask helpers (`fields`),
and the groups that carry no signal (`thin_groups`: too few valid episodes; `uniform_groups`: one score for all)."""
