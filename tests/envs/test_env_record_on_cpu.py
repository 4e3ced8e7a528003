"""One record per env: an env registered with `register_env` alone names its tasks, its start timeout and its
held-out set, and every place that lists or resolves envs takes it (eval's `--env`, the dataset writer, verl-agent,
a recipe's evaluation command). Before the record, task names went through an `if env ==` chain that refused it."""

import pytest

from verl_cua.envs import EnvSpec, EnvUsageError, register_env
from verl_cua.envs.task_sets import resolve_tasks


def test_an_env_without_a_resolver_takes_each_item_as_a_task_name(scratch_env):
    scratch_env("kiosk")
    refs = resolve_tasks("kiosk", "open-file, save-file,open-file")
    assert [(r.env, r.task, r.key) for r in refs] == [
        ("kiosk", "open-file", "kiosk/open-file"),
        ("kiosk", "save-file", "kiosk/save-file"),
    ]


def test_an_env_of_seeded_tasks_runs_each_under_every_seed(scratch_env):
    scratch_env("arcade", EnvSpec(seeded_tasks=True))
    refs = resolve_tasks("arcade", ["pong", "maze@7"], "0-1")
    assert [(r.task, r.key) for r in refs] == [
        ({"task": "pong", "seed": 0}, "pong/seed-0"),
        ({"task": "pong", "seed": 1}, "pong/seed-1"),
        ({"task": "maze", "seed": 7}, "maze/seed-7"),
    ]
    with pytest.raises(ValueError, match="seeds must look like 0-9 or 1,2,3"):
        resolve_tasks("arcade", ["pong"], "zero")


def test_a_record_s_resolver_and_start_timeout_are_the_env_s_own(scratch_env):
    from verl_cua.envs import env_start_timeout
    from verl_cua.envs.task_sets import TaskRef

    def levels(items, seeds):
        if "lava" in items:
            raise EnvUsageError("no level lava; levels: one, two")
        return [TaskRef("game", {"level": item}, "levels", item) for item in items]

    scratch_env("game", EnvSpec(tasks=levels, start_timeout=lambda size, kwargs: 10.0 * size + kwargs.get("boot", 0)))
    assert [r.task for r in resolve_tasks("game", "one,two")] == [{"level": "one"}, {"level": "two"}]
    with pytest.raises(EnvUsageError, match="^no level lava; levels: one, two$"):
        resolve_tasks("game", "lava")
    assert env_start_timeout("game", {"boot": 5}, 3, default=120.0) == 35.0
    assert env_start_timeout("miniwob", {}, 3, default=120.0) == 120.0  # a record without one: the pool's default


def test_an_unknown_env_is_one_line_naming_the_registered_ones(scratch_env):
    scratch_env("kiosk")
    with pytest.raises(EnvUsageError, match="^unknown env 'desk'; valid envs: kiosk, miniwob, osworld"):
        resolve_tasks("desk", "a")


def test_every_env_list_is_the_registry(scratch_env, capsys):
    from verl_cua.cli import build_parser
    from verl_cua.integrations.verl import dataset
    from verl_cua.integrations.verl_agent.settings import env_name, read_settings
    from verl_cua.recipe_export.evaluation import eval_command

    scratch_env("kiosk", EnvSpec(default_tasks="open-file", held_out="save-file"))
    argv = ["eval", "--env", "kiosk", "--tasks", "x", "--model", "m", "--format", "qwen3vl", "--out", "runs"]
    args = build_parser().parse_args(argv)
    assert args.env == "kiosk"  # `verl-cua eval --env` takes it
    assert [row["extra_info"]["task"] for row in dataset.task_rows("kiosk", ["open-file"])] == ["open-file"]
    assert env_name("kiosk/open-file") == "kiosk" and read_settings("kiosk", {}).tasks == "open-file"
    command = eval_command({"cua": {"env": {"name": "kiosk"}, "action": {"format": "qwen3vl"}}}, {}, "m")
    assert "--env kiosk --tasks save-file --model m" in command and "--seeds" not in command


def test_a_second_entry_point_under_a_taken_name_is_refused(scratch_env):
    from verl_cua.envs import ENV_REGISTRY

    scratch_env("kiosk", entry_point="my_pkg.kiosk:Kiosk")
    register_env("kiosk", "my_pkg.kiosk:Kiosk", EnvSpec(keeps_idle=True))  # the same env, a new record: taken
    assert ENV_REGISTRY["kiosk"].keeps_idle
    with pytest.raises(ValueError, match=r"^env 'kiosk' is already registered: my_pkg.kiosk:Kiosk vs other:Kiosk$"):
        register_env("kiosk", "other:Kiosk")
    with pytest.raises(ValueError, match="already registered"):
        ENV_REGISTRY["kiosk"] = EnvSpec(name="kiosk", entry_point="other:Kiosk")  # no silent overwrite either
