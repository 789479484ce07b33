"""Frozen datasets: corpus, queries and qrels as Parquet plus a manifest, one partition per dataset."""


import dagster as dg

from assets.metadata import partition_check, with_provenance
from embedpyramid.code_version import function_version
from embedpyramid.data import freeze_dataset, load_configured_dataset, verify_frozen
from embedpyramid.rendering.tables import markdown_table
from embedpyramid.store import read_frame
from graphbase.conditions import EVALUATE_WHEN_STALE
from graphbase.facets import DATASET_SOURCE, facet_deps
from graphbase.partitions import dataset_partitions
from resources import ProjectResource


@dg.asset(
    partitions_def=dataset_partitions,
    deps=facet_deps(DATASET_SOURCE),
    group_name="data",
    code_version=function_version(__file__, "frozen_dataset"),
    kinds={"parquet"},
    automation_condition=EVALUATE_WHEN_STALE,
    check_specs=[partition_check("tables_match_manifest", "frozen_dataset", dataset_partitions,
                                 "Tables match their manifest hashes and qrels name known ids", blocking=True)],
)
def frozen_dataset(context: dg.AssetExecutionContext, project: ProjectResource) -> dg.MaterializeResult:
    """The dataset frozen to normalized tables; its data version is the hash of their hashes."""
    name = context.partition_key
    frozen = freeze_dataset(name, load_configured_dataset(project.config, name), project.store.dataset_dir(name))
    problems = verify_frozen(frozen)
    queries = read_frame(frozen.path("queries"))
    slices = {
        column: markdown_table(queries.group_by(column).len("queries").sort("queries", descending=True))
        for column in frozen.manifest["slice_columns"]
    }
    return with_provenance(context, project, dg.MaterializeResult(
        metadata={
            **{f"{key}": dg.MetadataValue.int(value) for key, value in frozen.manifest["counts"].items()},
            "path": dg.MetadataValue.path(str(frozen.directory)),
            "source": dg.MetadataValue.json(frozen.manifest["source"]),
            **{f"slice {column}": dg.MetadataValue.md(table) for column, table in slices.items()},
        },
        data_version=dg.DataVersion(frozen.version),
        check_results=[dg.AssetCheckResult(check_name="tables_match_manifest", passed=not problems,
                                           metadata={"problems": dg.MetadataValue.json(problems)})],
    ))
