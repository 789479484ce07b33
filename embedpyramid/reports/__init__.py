"""The comparison report: verdict, leaderboard with its floor, Tukey HSD groups, comparison
table, forest plot, delta distributions, regression lists and the environment record, as
Markdown and self-contained HTML with hand-written SVG (``report``, ``svg``, ``tables``), and the
readers of what a run wrote (``results``, ``overview``, ``verdict``). Import from the modules:
this package imports none of them, so a command that needs one table helper (the warm start's
``tables.first_few``) does not load the report's renderer."""
