"""The Dagster vocabulary that resources, assets and pipelines share: partitions, tags, config
facets and freshness (Dagster's stale status, the automation conditions), the instance (run
history, config binding, data-folder lock), the pools of the model-running steps, and the one
adapter over Dagster's internals.

It imports the core and Dagster only, never ``resources``, ``assets`` or ``pipelines``: the
layers import downward — core ← graphbase ← resources ← assets ← pipelines (checked by
``tests/test_import_cycles.py``).
"""
