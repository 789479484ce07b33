"""The code location's settings from the environment (pipelines/settings.py): how often the config
sensor and the automation tick, and how a launched run executes its steps. The deployment test
(tests/deploy/test_single_host.py) runs the daemon with both set."""

import dagster as dg
import pytest
from graph_helpers import toy

from embedpyramid.config import ConfigError
from pipelines.automation import DEFAULT_SENSOR_INTERVAL
from pipelines.definitions import _load_location
from pipelines.settings import EXECUTOR_VARIABLE, SENSOR_INTERVAL_VARIABLE, location_executor, sensor_interval


def test_sensor_interval_defaults_to_30_s_and_refuses_what_the_daemons_cannot_honour():
    assert sensor_interval({}) == sensor_interval({SENSOR_INTERVAL_VARIABLE: " "}) == DEFAULT_SENSOR_INTERVAL == 30
    assert sensor_interval({SENSOR_INTERVAL_VARIABLE: "5"}) == 5
    assert sensor_interval({SENSOR_INTERVAL_VARIABLE: " 300 "}) == 300
    for bad in ("4", "0", "-10", "2.5", "5s", "fast"):
        with pytest.raises(ConfigError, match=rf"^{SENSOR_INTERVAL_VARIABLE}=.*at least 5"):
            sensor_interval({SENSOR_INTERVAL_VARIABLE: bad})


def test_executor_defaults_to_dagsters_multiprocess_and_names_the_choices_when_wrong():
    assert location_executor({}) is location_executor({EXECUTOR_VARIABLE: "multiprocess"}) is \
        dg.multi_or_in_process_executor
    assert location_executor({EXECUTOR_VARIABLE: "in_process"}) is dg.in_process_executor
    with pytest.raises(ConfigError, match=rf"^{EXECUTOR_VARIABLE}='threads': .*in_process"):
        location_executor({EXECUTOR_VARIABLE: "threads"})


def test_the_code_location_reads_both_from_its_environment(write_configs, tiny, tmp_path, monkeypatch):
    monkeypatch.setenv("EMBEDPYRAMID_CONFIGS", str(write_configs(models={"ngrams": toy()}, datasets=tiny)))
    monkeypatch.setenv("EMBEDPYRAMID_DATA", str(tmp_path / "data"))

    def loaded() -> tuple[set[int | None], set[str]]:
        defs = _load_location()
        jobs = [defs.resolve_job_def(name) for name in ("evaluate", "summary", "refresh_datasets")]
        return ({sensor.minimum_interval_seconds for sensor in defs.get_repository_def().sensor_defs},
                {job.executor_def.name for job in jobs})

    monkeypatch.delenv(SENSOR_INTERVAL_VARIABLE, raising=False)
    monkeypatch.delenv(EXECUTOR_VARIABLE, raising=False)
    assert loaded() == ({30}, {dg.multi_or_in_process_executor.name})
    monkeypatch.setenv(SENSOR_INTERVAL_VARIABLE, "5")
    monkeypatch.setenv(EXECUTOR_VARIABLE, "in_process")
    assert loaded() == ({5}, {dg.in_process_executor.name})
    monkeypatch.setenv(SENSOR_INTERVAL_VARIABLE, "1")
    with pytest.raises(ConfigError, match=SENSOR_INTERVAL_VARIABLE):
        _load_location()
