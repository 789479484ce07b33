"""Rendering, a floor every level uses: the report document (sections, figures, Markdown and
self-contained HTML: ``document``), hand-written SVG plots (``svg``), formatted tables
(``tables``) and the HTML templates (``templates``). Import from the modules: this package
imports none of them, so a command that needs one table helper does not load the renderer."""
