"""The shipped Dagster instance files (docs/instance/) load as shipped, with their environment set:
the single-host file opens a real instance on PostgreSQL and S3; the Kubernetes file passes
Dagster's instance schema and the schema of every class it names, and its storage, queue and
compute-log manager are built from it (the run launcher would need a cluster to connect to)."""

import shutil
from pathlib import Path

import boto3
import dagster as dg
import pytest
from local_servers import require_cluster_packages

from pipelines.automation import AUTOMATION_TAG

require_cluster_packages()

INSTANCE_FILES = Path(__file__).resolve().parents[2] / "docs" / "instance"
CLASS_KEYS = ("run_coordinator", "run_launcher", "compute_logs")


@pytest.fixture
def instance_env(postgres, s3, monkeypatch, request):
    database = request.node.name.replace("test_", "")[:40]
    postgres.create_database(database)
    bucket = f"logs-{database}".replace("_", "-")
    for name, value in {**postgres.env(database), **s3.env(), "EMBEDPYRAMID_LOGS_BUCKET": bucket}.items():
        monkeypatch.setenv(name, value)
    boto3.client("s3").create_bucket(Bucket=bucket)
    return bucket


def home_with(tmp_path: Path, name: str) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(INSTANCE_FILES / name, home / "dagster.yaml")
    return home


def test_single_host_file_opens_an_instance_on_postgres_with_the_queue_and_logs_in_s3(instance_env, tmp_path):
    from dagster_aws.s3.compute_log_manager import S3ComputeLogManager
    from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage

    instance = dg.DagsterInstance.from_config(str(home_with(tmp_path, "single-host.yaml")))
    assert isinstance(instance.run_storage, PostgresRunStorage)
    assert isinstance(instance.event_log_storage, PostgresEventLogStorage)
    assert type(instance.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert type(instance.run_launcher).__name__ == "DefaultRunLauncher"
    assert isinstance(instance.compute_log_manager, S3ComputeLogManager)
    assert instance.run_monitoring_enabled and instance.run_monitoring_settings["free_slots_after_run_end_seconds"] > 0
    assert instance.run_retries_enabled and instance.run_retries_max_retries == 1
    assert instance.event_log_storage.supports_global_concurrency_limits
    queue = instance.get_concurrency_config().run_queue_config
    assert queue.max_user_code_failure_retries > 0
    limit = queue.tag_concurrency_limits[0]
    assert (limit["key"], limit["value"]) == (AUTOMATION_TAG, "evaluation")
    # The instance works: a run goes in, and comes back out, through PostgreSQL.
    run = instance.create_run_for_job(dg.GraphDefinition("noop", node_defs=[]).to_job())
    assert instance.get_run_by_id(run.run_id).job_name == "noop"


def test_kubernetes_file_passes_the_schemas_of_dagster_and_of_its_classes(instance_env, tmp_path):
    pytest.importorskip("dagster_k8s", reason="dagster-k8s is not installed: pip install -e '.[test]'")
    from dagster._config import process_config, resolve_to_config_type
    from dagster._core.instance.config import dagster_instance_config
    from dagster._core.instance.ref import InstanceRef
    from dagster._serdes.config_class import class_from_code_pointer

    home = home_with(tmp_path, "kubernetes.yaml")
    config, _ = dagster_instance_config(str(home), "dagster.yaml")
    assert config["run_monitoring"]["max_resume_run_attempts"] > 0  # K8sRunLauncher resumes runs
    assert config["run_monitoring"]["free_slots_after_run_end_seconds"] > 0
    limit = config["concurrency"]["runs"]["tag_concurrency_limits"][0]
    assert (limit["key"], limit["value"]) == (AUTOMATION_TAG, "evaluation")
    for key in CLASS_KEYS:
        entry = config[key]
        cls = class_from_code_pointer(entry["module"], entry["class"])
        checked = process_config(resolve_to_config_type(cls.config_type()), entry.get("config") or {})
        assert checked.success, f"{key}: {checked.errors}"
    # Built from the file as DagsterInstance builds them (the launcher needs a cluster to connect to).
    ref = InstanceRef.from_dir(str(home))
    assert ref.run_launcher_data.class_name == "K8sRunLauncher"
    assert ref.run_storage.get_runs() == [] and ref.event_storage.supports_global_concurrency_limits
    assert type(ref.run_coordinator).__name__ == "QueuedRunCoordinator"
    assert type(ref.compute_log_manager).__name__ == "S3ComputeLogManager"
