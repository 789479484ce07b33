"""The code location's settings from the environment of the process that loads it (the daemon's
code server, ``dagster dev``), beside ``EMBEDPYRAMID_CONFIGS`` / ``EMBEDPYRAMID_DATA``:

- ``EMBEDPYRAMID_SENSOR_INTERVAL``: seconds between two ticks of ``config_sensor`` and
  ``evaluation_automation`` (default 30; at least 5, as often as Dagster's daemons look).
- ``EMBEDPYRAMID_EXECUTOR``: how a launched run executes its steps — ``multiprocess`` (the
  default: each step a process of its own, several at once as the pools allow) or ``in_process``
  (every step in the run's own process, one after another: no process, and no load of the code
  location, per step).
- ``EMBEDPYRAMID_CONFIG_ERRORS``: what a config folder that does not validate does to the code
  location — ``fail`` (the default: the location does not load, and ``dagster definitions
  validate`` exits non-zero naming the file, the line and the key; ``dagster dev`` shows the same
  error as the location's load error) or ``degrade`` (for a running deployment that should keep
  its sensors and schedules while someone fixes the folder: the location loads without the
  folder's L4 and L5 assets, and the error shows as the failed check ``config/folder: loads``, in
  the failing ``config_sensor`` ticks and in the load's log).

The CLI executes its runs in its own process whatever these say; a bad value stops the code
location from loading, with a message naming the variable.
"""

from __future__ import annotations

from collections.abc import Mapping

import dagster as dg

from embedpyramid.config import ConfigError
from pipelines.automation import DEFAULT_SENSOR_INTERVAL

SENSOR_INTERVAL_VARIABLE = "EMBEDPYRAMID_SENSOR_INTERVAL"
# Dagster's sensor and automation daemons look for due ticks every 5 s: a shorter interval ticks no faster.
MIN_SENSOR_INTERVAL = 5
EXECUTOR_VARIABLE = "EMBEDPYRAMID_EXECUTOR"
EXECUTORS: dict[str, dg.ExecutorDefinition] = {
    # Dagster's default executor: multiprocess unless a run's config selects in_process.
    "multiprocess": dg.multi_or_in_process_executor,
    "in_process": dg.in_process_executor,
}


def sensor_interval(environ: Mapping[str, str]) -> int:
    """Seconds between two ticks of the config sensor and the automation: ``DEFAULT_SENSOR_INTERVAL``
    where the variable is unset or empty, else a whole number of at least ``MIN_SENSOR_INTERVAL``."""
    value = environ.get(SENSOR_INTERVAL_VARIABLE, "").strip()
    if not value:
        return DEFAULT_SENSOR_INTERVAL
    if not value.isdecimal() or int(value) < MIN_SENSOR_INTERVAL:
        raise ConfigError(f"{SENSOR_INTERVAL_VARIABLE}={value!r}: the seconds between two ticks of the config sensor "
                          f"and the automation must be a whole number of at least {MIN_SENSOR_INTERVAL} (Dagster's "
                          f"daemons tick no faster); unset it for the default, {DEFAULT_SENSOR_INTERVAL}")
    return int(value)


CONFIG_ERRORS_VARIABLE = "EMBEDPYRAMID_CONFIG_ERRORS"
CONFIG_ERRORS = ("fail", "degrade")


def config_errors(environ: Mapping[str, str]) -> str:
    """``fail`` where the variable is unset or empty, else ``fail`` or ``degrade`` as it says."""
    value = environ.get(CONFIG_ERRORS_VARIABLE, "").strip() or "fail"
    if value not in CONFIG_ERRORS:
        raise ConfigError(f"{CONFIG_ERRORS_VARIABLE}={value!r}: use one of {', '.join(CONFIG_ERRORS)} (unset: fail)")
    return value


def location_executor(environ: Mapping[str, str]) -> dg.ExecutorDefinition:
    """The executor of the runs the location launches: ``multiprocess`` where the variable is unset
    or empty, else the one it names."""
    name = environ.get(EXECUTOR_VARIABLE, "").strip() or "multiprocess"
    if name not in EXECUTORS:
        raise ConfigError(f"{EXECUTOR_VARIABLE}={name!r}: not an executor of this code location; use one of "
                          f"{', '.join(EXECUTORS)} (unset: multiprocess)")
    return EXECUTORS[name]
