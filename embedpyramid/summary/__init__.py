"""The cross-level summary, above every level: which (model, dataset) partitions are evaluated
and current, and their paired comparisons, Tukey HSD groups, random-ranking floor and worst
regressions (``comparisons``, ``regressions``); the pyramid overview (``overview``), the
environment record (``environment``), what the report holds, gathered from every level
(``contents``), and how it is laid out (``report``); the results database and its leaderboard
(``results``). Import from the modules: this package imports none of them."""
