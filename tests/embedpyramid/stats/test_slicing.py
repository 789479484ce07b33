from embedpyramid.stats.slicing import length_bucket_names


def test_length_bucket_names():
    assert length_bucket_names((4, 8, 16)) == ["<=4 words", "5-8 words", "9-16 words", ">16 words"]
    assert length_bucket_names((1, 2)) == ["<=1 words", "2 words", ">2 words"]
