"""On PostgreSQL (a real server on 127.0.0.1), dagster-postgres opens a connection per query; the
kept freshness states hold one open for the instance's life (graphbase.dagster_internals.hold_connections),
so a refresh of a real run's states opens one connection, not one per query, reads the same, and
closes it when the instance is disposed."""

import dagster as dg
import psycopg2
from graph_helpers import beir_folder, toy
from local_servers import require_cluster_packages

from embedpyramid.config import load_config
from graphbase.freshness import Freshness
from graphbase.freshness_store import kept_freshness, reconcile
from graphbase.partitions import model_dataset_key
from pipelines.runner import run_pipeline
from pipelines.session import open_session

require_cluster_packages()


def postgres_instance(postgres, tmp_path, name: str) -> dg.DagsterInstance:
    postgres.create_database(name)
    home = tmp_path / name
    home.mkdir()
    (home / "dagster.yaml").write_text(
        "storage:\n  postgres:\n    postgres_db:\n"
        f"      hostname: {postgres.host}\n      port: {postgres.port}\n      username: {postgres.user}\n"
        f"      password: ''\n      db_name: {name}\n      scheme: postgresql+psycopg2\ntelemetry:\n  enabled: false\n")
    return dg.DagsterInstance.from_config(str(home))


def test_a_refresh_on_postgres_opens_one_connection_and_reads_what_a_full_walk_reads(
        postgres, write_configs, tmp_path, monkeypatch):
    tiny = {"tiny": {"loader": "beir", "path": str(beir_folder(tmp_path / "tiny-beir"))}}
    folder = write_configs(models={"a": toy(16)}, datasets=tiny)
    data = tmp_path / "data"
    instance = postgres_instance(postgres, tmp_path, "refresh")
    assert run_pipeline(folder, data, instance=instance, log=lambda _: None).failures == []
    graph = open_session(load_config(folder), data, instance, log=lambda _: None, verbose=False).defs.resolve_asset_graph()

    opened = []
    connect = psycopg2.connect
    monkeypatch.setattr(psycopg2, "connect", lambda *args, **kwargs: opened.append(1) or connect(*args, **kwargs))
    # Another process's instance (a tick's, in the code server): a fresh one on the same database.
    tick = dg.DagsterInstance.from_config(instance.root_directory)
    opened.clear()
    Freshness(tick, graph).state(dg.AssetKey("retrieval_metrics"), str(model_dataset_key("a", "tiny")))
    per_query = len(opened)  # Dagster's own engines: a connection per query
    opened.clear()
    refreshed = kept_freshness(tick, graph)
    assert refreshed.state(dg.AssetKey("retrieval_metrics"), str(model_dataset_key("a", "tiny"))).state == "fresh"
    assert per_query > 10 and len(opened) <= 2, (per_query, len(opened))
    assert reconcile(tick, graph) == []
    tick.dispose()
    instance.dispose()
    # Disposed, the instances hold nothing: a database with a connection open could not be a template.
    with psycopg2.connect(host=postgres.host, port=postgres.port, user=postgres.user, dbname="postgres") as admin, \
            admin.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = 'refresh'")
        assert cursor.fetchone() == (0,)
