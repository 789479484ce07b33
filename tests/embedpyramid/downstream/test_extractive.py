import math

from embedpyramid.downstream import Context, ExtractiveGenerator, Passage


def context(query, *texts):
    return Context("q", query, tuple(Passage(f"d{i}", i, text) for i, text in enumerate(texts, start=1)))


CORPUS = ["the cat sat on the mat", "the dog barked", "a cat and a dog", "the end"]
GENERATOR = ExtractiveGenerator.from_corpus(CORPUS)


def test_idf_is_the_smoothed_formula_over_the_corpus():
    # "cat" is in 2 of 4 documents, "the" in 3, "zebra" in none.
    assert math.isclose(GENERATOR.idf("cat"), math.log(5 / 3) + 1)
    assert math.isclose(GENERATOR.idf("the"), math.log(5 / 4) + 1)
    assert math.isclose(GENERATOR.idf("zebra"), math.log(5 / 1) + 1)


def test_the_sentence_with_the_most_idf_weight_of_query_words_wins_and_cites_its_passage():
    answer = GENERATOR.answer(context("Where did the cat sit?", "The dog barked. The end.", "A cat sat here. Nothing else!"))
    # "The dog barked." shares only "the" (1.223); "A cat sat here." shares cat + sat (1.511 + 1.916).
    assert answer.text == "A cat sat here." and answer.citations == ("d2",) and answer.invalid_citations == ()


def test_ties_go_to_the_better_ranked_passage_then_the_earlier_sentence():
    tied = GENERATOR.answer(context("cat", "No. The cat.", "A cat!"))
    assert tied.text == "The cat." and tied.citations == ("d1",)


def test_no_shared_word_falls_back_to_the_lead_sentence_and_an_empty_context_to_no_answer():
    lead = GENERATOR.answer(context("zebra?", "First one. Second one.", "Other."))
    assert lead.text == "First one." and lead.citations == ("d1",)
    empty = GENERATOR.answer(context("cat"))
    assert empty.text == "" and empty.citations == ()
