"""Asset tags that the jobs and the runner select on."""

STAGE_TAG, SUMMARY_STAGE = "embedpyramid/stage", "summary"
"""Further cross-model (unpartitioned) assets of a level that run with the summaries carry this tag
(L6's grade_analysis): the summary job and `embedpyramid run` pick them up."""
DATASET_LEVEL_TAG = ("embedpyramid/partitioned-by", "dataset")
"""Tags the assets partitioned by dataset alone that evaluate a frozen dataset (L5's BM25)."""
