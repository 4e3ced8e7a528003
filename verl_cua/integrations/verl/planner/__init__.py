"""The planner-executor mode of `gui_agent` (CODA, `cua.planner.*`): the policy plans, a frozen executor acts."""
