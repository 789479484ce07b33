import re

import pytest

from embedpyramid.config import DjangoBitextDataset
from embedpyramid.data import DataError, load_django_bitext
from embedpyramid.data.django_bitext import catalogue_files, clean_message, django_directory


def test_placeholders_format_fields_and_tags_are_removed():
    assert clean_message("Ensure this value has at most %(limit_value)d characters (it has %(show_value)d).") == (
        "Ensure this value has at most characters (it has ).")
    assert clean_message("Delete %s and {name} 100%% <b>now</b> &amp; later") == "Delete and 100 now & later"
    assert clean_message("%(value).2f percent of {0}") == "percent of"


def test_english_to_five_languages_from_every_catalogue():
    tables = load_django_bitext(DjangoBitextDataset(loader="django-bitext"))
    counts = tables.source["pairs"]
    assert list(counts) == ["en-de", "en-fr", "en-es", "en-ja", "en-ko"] and min(counts.values()) > 200
    texts = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["text"].to_pylist(), strict=True))
    languages = dict(zip(tables.texts["text_id"].to_pylist(), tables.texts["language"].to_pylist(), strict=True))
    markup = re.compile(r"%\(|%[sd]\b|\{[^}]*\}|<[a-z/]")
    for pair in tables.pairs.to_pylist():
        source, target = texts[pair["text_id_1"]], texts[pair["text_id_2"]]
        assert len(source.split()) >= 4 and source != target
        assert not markup.search(source) and not markup.search(target)
        assert languages[pair["text_id_1"]] == "en" and pair["language_pair"] == f"en-{languages[pair['text_id_2']]}"
    korean = [texts[p["text_id_2"]] for p in tables.pairs.to_pylist() if p["language_pair"] == "en-ko"]
    assert all(re.search("[\uac00-\ud7a3]", text) for text in korean[:50])  # Hangul, not English copies
    # English strings shared by several language pairs are one text, encoded once.
    assert tables.texts.num_rows < 2 * tables.pairs.num_rows


def test_catalogues_and_unknown_language():
    files = catalogue_files(django_directory(), "ko")
    assert files[0].parts[-5:] == ("conf", "locale", "ko", "LC_MESSAGES", "django.mo") and len(files) > 5
    with pytest.raises(DataError, match="no catalogue for language 'xx'; available: af, ar"):
        load_django_bitext(DjangoBitextDataset(loader="django-bitext", languages=["de", "xx"]))


@pytest.mark.parametrize(("content", "detail"), [
    (lambda real: real[:20], "unpack requires a buffer of 8 bytes"),  # truncated inside the header
    (lambda real: real[: len(real) // 2], "File is corrupt"),  # offsets past the end
    (lambda real: b"not a catalogue at all", "Bad magic number"),
])
def test_a_corrupt_catalogue_is_refused_naming_the_file_and_the_fix(tmp_path, content, detail):
    real = (django_directory() / "conf" / "locale" / "ko" / "LC_MESSAGES" / "django.mo").read_bytes()
    corrupt = tmp_path / "conf" / "locale" / "ko" / "LC_MESSAGES" / "django.mo"
    corrupt.parent.mkdir(parents=True)
    corrupt.write_bytes(content(real))
    (tmp_path / "contrib").mkdir()
    with pytest.raises(DataError) as refused:
        load_django_bitext(DjangoBitextDataset(loader="django-bitext", languages=["ko"]), root=tmp_path)
    assert str(refused.value) == (
        f"{corrupt}: not a readable gettext catalogue ({detail}: the file is corrupt or truncated); reinstall "
        "Django (pip install --force-reinstall django) or remove that language from the dataset's languages in "
        "datasets.yaml")
