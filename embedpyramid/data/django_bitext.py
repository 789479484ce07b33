"""Bitext from Django's translation catalogues: English UI strings and their human translations.

Django ships compiled gettext catalogues (``.mo``) for ~100 languages: the project-wide one
(``django/conf/locale/<lang>/LC_MESSAGES/django.mo``) and one per contrib app
(``django/contrib/<app>/locale/<lang>/LC_MESSAGES/{django,djangojs}.mo``). Each maps an English
message id to its translation. They are read with the standard library's ``gettext``; the
message context (``context\\x04id``) is dropped, and of a plural entry the first form is kept
(the singular, or the only form in languages such as Japanese and Korean).

So that a pair cannot be matched on markup alone, both sides are cleaned: printf placeholders
(``%(name)s``, ``%s``, ``%d``, ``%%``…), format fields (``{name}``, ``{}``) and HTML tags are
removed, entities decoded and whitespace collapsed. A pair is kept when the English side has at
least ``min_words`` words and the translation is non-empty and differs from the English (an
untranslated copy would be a free match). The first catalogue that translates an English string
wins (project catalogue first, then the apps in name order); two English strings may share a
translation, which is then one target that both find.
"""

from __future__ import annotations

import gettext
import hashlib
import html
import re
import struct
from importlib.util import find_spec
from pathlib import Path

import pyarrow as pa

from embedpyramid.config.datasets import DjangoBitextDataset
from embedpyramid.data.frozen import PAIRS_SCHEMA, DataError, TaskTables, task_tables

SOURCE_LANGUAGE = "en"
MARKUP = re.compile(
    r"%\([^)]*\)[-#0 +]*\d*(?:\.\d+)?[a-zA-Z]"  # %(name)s, %(count)d, %(value).2f
    r"|%[-#0 +]*\d*(?:\.\d+)?[a-zA-Z%]"  # %s, %d, %%
    r"|\{[^{}]*\}"  # {name}, {0}, {}
    r"|<[^<>]+>"  # HTML tags
)


def clean_message(text: str) -> str:
    """A catalogue string without placeholders, format fields or tags, entities decoded and
    whitespace collapsed."""
    return " ".join(html.unescape(MARKUP.sub(" ", text)).split())


def django_directory() -> Path:
    spec = find_spec("django")
    if spec is None or not spec.submodule_search_locations:
        raise DataError("package django is not installed; install it with pip install django")
    return Path(next(iter(spec.submodule_search_locations)))


def catalogue_files(root: Path, language: str) -> list[Path]:
    """The project catalogue of ``language`` first, then each contrib app's, in name order."""
    project = root / "conf" / "locale" / language / "LC_MESSAGES" / "django.mo"
    if not project.is_file():
        available = sorted(p.name for p in (root / "conf" / "locale").iterdir() if (p / "LC_MESSAGES").is_dir())
        raise DataError(f"django has no catalogue for language {language!r}; available: {', '.join(available)}")
    apps = sorted((root / "contrib").glob(f"*/locale/{language}/LC_MESSAGES/*.mo"))
    return [project, *apps]


def read_catalogue(path: Path) -> dict[str, str]:
    """English message id → translation of one ``.mo`` file (context dropped, first plural form).

    A file gettext cannot parse (bad magic, truncated: ``struct.error``, offsets past the end,
    text not in its declared charset) is refused naming the file and how to restore it."""
    with path.open("rb") as handle:
        try:
            # gettext exposes no public iteration over a catalogue; _catalog is the parsed mapping
            # (Django's own JavaScript catalogue view reads it the same way).
            catalogue = gettext.GNUTranslations(handle)._catalog
        except (OSError, struct.error, UnicodeDecodeError, LookupError, ValueError) as error:
            detail = (error.strerror or "") if isinstance(error, OSError) and error.errno == 0 else str(error)
            raise DataError(
                f"{path}: not a readable gettext catalogue ({' '.join(detail.split())}: the file is corrupt or "
                "truncated); reinstall Django (pip install --force-reinstall django) or remove that language "
                "from the dataset's languages in datasets.yaml"
            ) from None
    messages: dict[str, str] = {}
    for key, translation in catalogue.items():
        if isinstance(key, tuple):
            key, form = key
            if form != 0:
                continue
        if key:
            messages.setdefault(key.split("\x04")[-1], translation)
    return messages


def load_django_bitext(spec: DjangoBitextDataset, root: Path | None = None) -> TaskTables:
    """English → each of ``spec.languages``: texts (with ``language``) and one pair per English string."""
    root = root or django_directory()
    texts: dict[str, tuple[str, str]] = {}
    rows: list[tuple[str, str, str, str]] = []
    counts: dict[str, int] = {}
    for language in dict.fromkeys(spec.languages):
        files = catalogue_files(root, language)
        kept: dict[str, str] = {}
        for path in files:
            for message, translation in read_catalogue(path).items():
                source, target = clean_message(message), clean_message(translation)
                if len(source.split()) >= spec.min_words and target and target != source:
                    kept.setdefault(source, target)
        for source, target in kept.items():
            source_id, target_id = _text_id(SOURCE_LANGUAGE, source), _text_id(language, target)
            texts[source_id] = (source, SOURCE_LANGUAGE)
            texts[target_id] = (target, language)
            rows.append((f"{SOURCE_LANGUAGE}-{language}/{source_id}", source_id, target_id, f"{SOURCE_LANGUAGE}-{language}"))
        counts[f"{SOURCE_LANGUAGE}-{language}"] = len(kept)
        if not kept:
            raise DataError(f"{files[0]}: no {language} translations of strings with >= {spec.min_words} words")
    ordered = sorted(texts)
    table = pa.table({"text_id": ordered, "text": [texts[t][0] for t in ordered],
                      "language": [texts[t][1] for t in ordered]})
    pairs = pa.table({
        "pair_id": [row[0] for row in rows], "text_id_1": [row[1] for row in rows],
        "text_id_2": [row[2] for row in rows], "gold": [1.0] * len(rows), "split": ["test"] * len(rows),
    }, schema=PAIRS_SCHEMA).append_column("language_pair", pa.array([row[3] for row in rows]))
    source = {"loader": "django-bitext", "root": str(root), "min_words": spec.min_words, "pairs": counts,
              "cleaning": "placeholders, format fields and HTML tags removed; entities decoded"}
    return task_tables("bitext", table, pairs, source, f"django catalogues under {root}")


def _text_id(language: str, text: str) -> str:
    return f"{language}:" + hashlib.sha1(text.encode("utf-8")).hexdigest()[:12]
