"""CODA's planner-executor agent, text side: the spec, the planner's and executor's messages, the reply split."""

from verl_cua.actions.planner.context import (  # noqa: F401  (the package's API)
    Plan,
    PlanStep,
    executor_messages,
    planner_messages,
    split_plan,
    step_reply,
)
from verl_cua.actions.planner.spec import (  # noqa: F401  (the package's API)
    CODA,
    PLANNER_SPECS,
    PlannerSpec,
    get_planner_spec,
    register_planner_spec,
)
