import pytest

from embedpyramid.config import ClassificationSettings, ConfigError, load_config
from embedpyramid.config.tasks import TASK_FAMILIES, StsSettings


def test_default_task_datasets_are_kept_apart_from_retrieval(write_configs):
    config = load_config(write_configs())
    assert list(config.datasets) == ["chatterbot-en"]  # the retrieval graph sees only retrieval
    tasks = {name: spec.task for name, spec in config.task_datasets.items()}
    # Every family with data that installs from PyPI; reranking and multi-label classification read MTEB data.
    assert set(tasks.values()) == set(TASK_FAMILIES) - {"reranking", "multilabel_classification"}
    assert config.dataset("chatterbot-en").task_settings is None
    settings = config.task_dataset("chatterbot-categories").task_settings
    assert isinstance(settings, ClassificationSettings) and settings.seeds == [0]
    # A task without a settings block gets the family's defaults.
    assert config.task_dataset("lee-sts").task_settings == StsSettings()
    with pytest.raises(ConfigError, match="task dataset 'nope' is not in .*datasets.yaml"):
        config.task_dataset("nope")


def test_a_config_folder_without_task_datasets_still_loads(write_configs, small_chatterbot):
    config = load_config(write_configs(datasets=small_chatterbot))
    assert config.task_datasets == {} and list(config.datasets) == ["chatterbot-small"]


@pytest.mark.parametrize(("entry", "message"), [
    ({"loader": "gensim-lee", "task": "classification"},
     r"datasets\.bad\.task: Input should be 'sts'"),
    ({"loader": "chatterbot", "task": "bitext"},
     r"datasets\.bad\.task: Input should be 'retrieval', 'classification', 'clustering' or "
     r"'pair_classification'"),
    ({"loader": "chatterbot", "task": "classification", "clustering": {"seeds": [1]}},
     r"settings block 'clustering' belongs to task 'clustering', but this entry's task is 'classification'"),
    ({"loader": "chatterbot", "task": "classification", "classification": {"folds": 3, "inner_folds": 3}},
     r"inner_folds \(3\) must be below folds \(3\)"),
    ({"loader": "chatterbot", "task": "clustering", "clustering": {"seeds": [1, 1]}},
     r"datasets\.bad\.clustering\.seeds: seeds must be a non-empty list of distinct"),
    ({"loader": "django-bitext", "bitext": {"scorings": ["nearest", "cosine"]}},
     r"bitext\.scorings\.1: Input should be 'nearest', 'margin' or 'csls'"),
    ({"loader": "gensim-newsgroups", "drop_self_hits": True},
     r"drop_self_hits applies to retrieval only, not to task 'classification'"),
])
def test_invalid_task_entries_name_the_key_and_the_allowed_values(write_configs, entry, message):
    folder = write_configs(datasets={"bad": entry})
    with pytest.raises(ConfigError, match=message) as error:
        load_config(folder)
    assert str(folder / "datasets.yaml") in str(error.value)


def test_sts_file_must_exist(write_configs):
    folder = write_configs(datasets={"sts": {"loader": "sts-file", "path": "no/such.csv", "format": "stsb"}})
    with pytest.raises(ConfigError, match=r"datasets\.sts\.path: file .*no/such\.csv does not exist"):
        load_config(folder)
