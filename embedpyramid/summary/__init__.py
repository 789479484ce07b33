"""The cross-level summary, above every level: which (model, dataset) partitions are evaluated
and current, their paired comparisons, Tukey HSD groups, random-ranking floor and worst
regressions (``comparisons``, ``regressions``), the pyramid overview (``overview``), the
environment record (``environment``), the report that gathers every level's sections
(``report``) and the results database with its leaderboard (``results``). Import from the
modules: this package imports none of them."""
