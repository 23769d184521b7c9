"""A profile's knowledge file: read at start, and each turn's prompt carries what its words ask."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.turn.knowledge import NO_NOTES, Knowledge
from agent.turn.terms import stem
from agent.turn.wording import numbers, placeholder, refuses
from dialplan import ConfigError, load_config, parse_config
from dialplan.knowledge import Fact, load_facts

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "dialplan" / "personas" / "library.md"


def test_markdown_items_are_facts_under_their_headings(tmp_path):
    md = tmp_path / "k.md"
    md.write_text("# Shop\n## Hours\n- Open 9 to 5.\n- Closed on Sunday.\n\n## Prices\n"
                  "Coffee costs 2 dollars\nand tea 1.\n")
    facts = load_facts(md)
    assert facts == (Fact("Open 9 to 5.", "Shop > Hours"),
                     Fact("Closed on Sunday.", "Shop > Hours"),
                     Fact("Coffee costs 2 dollars and tea 1.", "Shop > Prices"))
    assert facts[0].shown == "Shop > Hours: Open 9 to 5."


def test_toml_facts_match_their_question_but_show_the_answer(tmp_path):
    t = tmp_path / "k.toml"
    t.write_text('[[facts]]\nquestion = "Can I park"\nanswer = "Parking is free."\n')
    (fact,) = load_facts(t)
    assert fact.shown == "Parking is free." and fact.topic == "Can I park?"
    assert Knowledge((fact,)).relevant("where do I park my car") == [fact]


@pytest.mark.parametrize("body,suffix,why", [
    ("", ".md", "no facts"), ("[[facts]]\nquestion = 'x'\n", ".toml", "needs an answer"),
    ("x", ".pdf", ".md or .toml"), ("facts = [", ".toml", "not valid TOML")])
def test_a_bad_knowledge_file_is_refused_naming_the_key(tmp_path, body, suffix, why):
    path = tmp_path / f"k{suffix}"
    path.write_text(body)
    with pytest.raises(ConfigError, match=rf"profiles\.p\.knowledge: .*{why}"):
        parse_config({"profiles": {"p": {"knowledge": str(path)}}})
    with pytest.raises(ConfigError, match=r"profiles\.p\.knowledge: .*cannot read"):
        parse_config({"profiles": {"p": {"knowledge": str(tmp_path / "missing.md")}}})


def test_the_shipped_config_reads_the_library_facts_beside_it():
    config = load_config(ROOT / "config.toml")
    facts = config.profiles["default"].facts
    assert len(facts) >= 20 and facts == load_facts(LIBRARY)
    with pytest.raises(ConfigError, match="unknown key 'profiles.p.facts'"):
        parse_config({"profiles": {"p": {"facts": []}}})


def test_stems_join_the_forms_a_caller_and_a_fact_use():
    assert stem("opens") == stem("open")
    assert stem("prices") == stem("price")
    assert stem("reserved") == stem("reserve")
    assert stem("children's") == "children"


@pytest.mark.parametrize("question,needle", [
    ("What time do you open on Saturday?", "On Saturday the library opens at 10 am"),
    ("How much is it to print in color?", "50 cents a page in color"),
    ("how late are you open during the week", "Monday to Friday"),
    ("when's story time for the kids", "Story time"),
    ("what's your phone number", "555 0142"),
])
def test_the_fact_that_answers_a_question_is_among_the_notes(question, needle):
    found = Knowledge(load_facts(LIBRARY)).relevant(question)
    assert any(needle in f.text for f in found), [f.text for f in found]


def test_words_that_ask_no_fact_get_the_rule_to_say_so():
    k = Knowledge(load_facts(LIBRARY))
    assert k.relevant("thank you goodbye") == []
    assert k.notes("okay thanks") == NO_NOTES
    assert "don't know" in NO_NOTES


def test_numbers_are_read_as_digits_and_one_only_beside_a_unit():
    assert numbers("Ten cents, or 50 cents in colour; forty-two") == {"10", "50", "40", "2"}
    assert numbers("a new one") == set() and numbers("one dollar a day") == {"1"}
    assert numbers("It costs 1,250 dollars") == {"1250"}


def test_a_clause_stating_a_number_no_fact_holds_is_unfounded():
    k = Knowledge(load_facts(LIBRARY), "The library opens at 9 am.")
    assert k.unfounded("The library owns 10,000 books.", "how many books") == {"10000"}
    assert k.unfounded("The late fee for a DVD is 1 dollar a day.", "dvd fee") == set()
    assert k.unfounded("Call us on five five five, zero one four two.", "") == set()
    assert k.unfounded("Your card number 4729 is noted.", "my card is 4729") == set()
    assert k.unfounded("It costs 75 dollars.", "") == {"75"}


def test_a_claim_about_something_the_caller_named_and_no_fact_mentions_is_unfounded():
    """Yes or no, the model knows nothing about it: a 3D printer, a wedding in the hall."""
    k = Knowledge(load_facts(LIBRARY), "You are the phone assistant of a public library.")
    printer = "Do you have a 3D printer, and how much does it cost to use?"
    assert k.unfounded("We don't have a 3D printer.", printer) == {"3d", "printer"}
    assert k.unfounded("Yes, we do have a 3D printer.", printer) == {"3d", "printer"}
    assert k.unfounded("Yes, you can rent the meeting hall for a wedding.",
                       "Can I rent the meeting hall for a wedding?") == {"wedding"}
    assert k.unfounded("There is no coffee shop here.", "Is there a coffee shop?") == {
        "coffee", "shop"}
    # What a fact holds, or words the caller did not say, are no made-up claim.
    assert k.unfounded("Yes, we have books in Spanish, French and Chinese.",
                       "Do you have books in French?") == set()
    assert k.unfounded("Yes, there is a free parking lot behind the building.",
                       "Is there parking?") == set()
    assert k.unfounded("Yes, you can book a study room at the front desk.",
                       "Can I book a study room?") == set()
    assert k.unfounded("We have many things to do.", "Do you have a 3D printer?") == set()
    assert k.unfounded("I don't know whether we have a 3D printer.", printer) == set()


def test_a_claim_with_any_verb_about_what_no_fact_mentions_is_unfounded():
    """"We deliver", "we don't ship": the verb is the claim as much as "we offer" is."""
    k = Knowledge(load_facts(LIBRARY), "You are the phone assistant of a public library.")
    assert k.unfounded("No, we don't deliver books to people's homes.",
                       "Do you deliver books to people's homes?") == {"deliver", "homes"}
    assert k.unfounded("We will ship it to you.", "Can you ship it to me?") == {"ship"}
    # Generic words around a question's subject carry no claim ("usually", "charge", "give").
    assert k.unfounded("We usually renew items online.", "Do you usually renew items online?"
                       ) == set()


def test_a_name_or_address_no_fact_or_caller_gave_is_unfounded():
    """A small model names a person or writes an e-mail address where it has no fact."""
    k = Knowledge(load_facts(LIBRARY), "You are the phone assistant of a public library.")
    assert k.unfounded("The head of the branch is named John Doe.", "Who runs the branch?") == {
        "John", "Doe"}
    assert k.unfounded("You can write to help@branch.org for that.", "What's your e-mail?") == {
        "help@branch.org"}
    # The caller's own name, days and months, and a sentence's first word are no invention.
    assert k.unfounded("Thank you, Maria, we are closed on Sunday.", "Hi, this is Maria.") == set()
    assert k.unfounded("On Saturday we open at 10 am, and in December too.", "") == set()
    assert k.unfounded("Sure, I can help with that.", "") == set()


def say_with_facts(reply: str, words: str, profile: str = "default"):
    """A fake LLM's ``reply`` to ``words`` on ``profile``; the result and the history."""
    from agent.turn.runner import TurnRunner
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    profile = load_config(ROOT / "config.toml").profiles[profile]
    stages = fake_stages(asr=FakeASR([words]), llm=FakeLLM(reply=reply), tts=FakeTTS())
    history: list = []
    result, _ = answer(TurnRunner(stages, profile), history)
    return result, [m.content for m in history]


def test_a_reply_that_makes_a_number_up_is_not_said():
    """The sentence with a made-up number is checked whole first: ``dont_know`` is said.

    The history has what was said.
    """
    result, said = say_with_facts("The library owns about 10,000 books. We have many more.",
                                  "How many books do you own?")
    assert result.unfounded == "The library owns about 10,000 books. (10000, owns)"
    dont_know = load_config(ROOT / "config.toml").profiles["default"].dont_know
    assert result.reply_text == dont_know and said[-1] == result.reply_text


def test_a_later_sentence_that_fails_ends_the_reply_after_the_whole_ones():
    """Nothing is spliced into a sentence begun, and no fallback follows a right answer."""
    result, said = say_with_facts("On Saturday we open at 10 am. On Sunday we open at 11 am, "
                                  "and close late.", "When do you open at the weekend?")
    assert result.unfounded == "On Sunday we open at 11 am, and close late. (11)"
    assert result.reply_text == "On Saturday we open at 10 am." == said[-1]


def test_strictly_a_fact_number_said_of_something_no_fact_mentions_is_unfounded():
    # The under-load 0.5B's answers (bench answers): the library's own numbers, lent out.
    cfg = load_config(ROOT / "config.toml")
    k = Knowledge(cfg.profiles["default"].facts)
    museum = ("The phone number of the city museum is 555 0142.",
              "What is the phone number of the city museum?")
    assert k.unfounded(*museum, strict=True) == {"city", "museum"}
    assert k.unfounded(*museum) == set()  # the 1.5B echoes words: not strict by default
    assert k.unfounded("The coffee shop next door opens at 9 am.",
                       "What time does the coffee shop next door open?", strict=True) == {
                           "coffee", "shop", "door"}
    # A number the caller gave may be said back; a fact's number said of what they asked is fine.
    assert k.unfounded("Yes, you can borrow 5 DVDs at a time.", "Can I borrow 5 DVDs at once?",
                       strict=True) == set()
    assert k.unfounded("A new library card costs 2 dollars.",
                       "My card got stolen, what does a replacement cost?", strict=True) == set()
    assert cfg.profiles["lite"].llm.strict_numbers and cfg.profiles["default"].llm.strict_numbers


def test_a_reply_that_claims_what_no_fact_holds_is_not_said():
    # The 1.5B's answer in every voice group (bench answers): whether there is one, it knows not.
    result, said = say_with_facts("We don't have a 3D printer. Printing is 10 cents a page.",
                                  "Do you have a 3D printer, and how much does it cost to use?")
    assert result.unfounded == "We don't have a 3D printer. (3d)"
    dont_know = load_config(ROOT / "config.toml").profiles["default"].dont_know
    assert result.reply_text == dont_know and "I don't know that" in dont_know
    assert said[-1] == result.reply_text


def test_the_first_clause_goes_early_only_where_the_caller_named_nothing_unknown():
    """It is the caller's wait; what follows may still fail (a made-up number).

    Rare with every fact in view: then ``dont_know`` follows it, and the call log says so.
    """
    result, said = say_with_facts("On Saturday, we open at 11 am.", "When do you open on Saturday?")
    dont_know = load_config(ROOT / "config.toml").profiles["default"].dont_know
    assert result.reply_text.startswith("On Saturday,") and "11" not in result.reply_text
    assert result.reply_text.endswith(dont_know) and said[-1] == result.reply_text
    assert result.unfounded == "On Saturday, we open at 11 am. (11, after its first clause)"
    # An apology opens a refusal or "I don't know": it waits for its sentence.
    result, _ = say_with_facts("Sorry, we open at 11 am.", "When do you open on Saturday?")
    assert result.reply_text == dont_know


def test_a_claim_split_over_two_clauses_is_judged_on_its_whole_sentence():
    # hibari's caller (bench answers): "for a wedding." only comes in the second clause.
    result, said = say_with_facts("Yes, you can rent the meeting hall for a wedding. The price "
                                  "depends on the number of guests.",
                                  "Can I rent the meeting hall for a wedding?")
    assert result.unfounded == "Yes, you can rent the meeting hall for a wedding. (wedding)"
    dont_know = load_config(ROOT / "config.toml").profiles["default"].dont_know
    assert result.reply_text == dont_know and "guests" not in result.reply_text


def test_a_reply_that_talks_about_its_tools_is_not_said():
    result, _ = say_with_facts('You can call the "take_message" function with the target '
                                 'accounts.', "I lost my card")
    assert "names a tool" in result.unfounded and "function" not in result.reply_text


def test_a_reply_with_a_template_slot_is_not_said():
    # The 1.5B's answer to "What's the head librarian's email address?" (bench answers).
    result, _ = say_with_facts("The head librarian's email address is [insert email address].",
                               "What's the head librarian's email address?")
    assert "a placeholder" in result.unfounded and "[" not in result.reply_text
    assert "I don't know that" in result.reply_text
    assert placeholder("Call 555-XXXX or write to {name}") and placeholder("Hi <name>")
    assert not placeholder("Story time is at 10:30 am, no sign-up needed.")


def test_a_reply_that_gives_for_free_what_no_fact_mentions_is_not_said():
    # The under-load 0.5B's answer to "How much are passport photos?" (bench answers).
    result, _ = say_with_facts("We know that passport photos are free for anyone in town.",
                               "How much are passport photos at the library?")
    assert "passport" in result.unfounded and "free" not in result.reply_text
    result, _ = say_with_facts("Yes, scanning is free.", "Is scanning free?")  # a fact says so
    assert result.unfounded == "" and result.reply_text == "Yes, scanning is free."


def test_a_reply_that_turns_the_caller_away_offers_someone_who_knows_instead():
    # The under-load 0.5B's answer to fact and unknown questions alike (bench answers).
    result, said = say_with_facts("We're sorry, but I can't assist with that.",
                                  "Can I rent the meeting hall for a wedding?")
    assert "refuses" in result.unfounded and "assist" not in result.reply_text
    assert said[-1] == result.reply_text and "put you through" in result.reply_text
    assert refuses("I am unable to help you with that request.")
    for fine in ("We can help with that.", "I can't help but agree: it is free."):
        assert not refuses(fine), fine


def test_what_the_under_load_model_turns_away_is_asked_of_the_profiles_own():
    """Before a word of it is said: the caller hears one answer, the one model's."""
    from agent.turn.runner import TurnRunner
    from dialplan.plan import under_load
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    cfg = load_config(ROOT / "config.toml")
    main = cfg.profiles["default"]
    refusal, fact = "We're sorry, but I can't assist with that.", "On Saturday we open at 10 am."
    words = "What time do you open on Saturday?"
    own_llm = FakeLLM(reply=fact)
    own = TurnRunner(fake_stages(asr=FakeASR([words]), llm=own_llm, tts=FakeTTS()), main)
    cheap = TurnRunner(fake_stages(asr=FakeASR([words]), llm=FakeLLM(reply=refusal),
                                   tts=FakeTTS()), under_load(main, cfg.profiles["lite"]))
    history: list = []
    result, _ = answer(cheap, history, escalate=own)
    assert result.reply_text == fact and len(own_llm.prompts) == 1
    assert result.unfounded.startswith("We're sorry, but I can't assist with that.")
    assert result.unfounded.endswith(f" (refuses: asked {main.llm.model})")
    assert [m.content for m in history] == [words, fact]
    # Once only: turned away by the profile's own model too (and again with the facts before
    # the words), the caller is offered someone.
    own_llm.reply = refusal
    result, _ = answer(cheap, [], escalate=own)
    assert result.reply_text == main.dont_know and len(own_llm.prompts) == 3
    assert own_llm.prompts[-1][-1].content.endswith(f"Question: {words}")
    # Something said already is not taken back: the reply ends after it, as without one.
    cheap.stages.llm.reply = f"{fact} {refusal}"
    result, _ = answer(cheap, [], escalate=own)
    assert result.reply_text == fact and len(own_llm.prompts) == 3


def test_a_profile_without_facts_still_never_reads_out_a_slot():
    """The slot check needs no knowledge file.

    Numbers it cannot judge without facts, so they are said; a profile without tools may say
    "function".
    """
    result, _ = say_with_facts("Please write to [insert email address].",
                               "How do I reach you?", profile="fast")
    assert "a placeholder" in result.unfounded and "[" not in result.reply_text
    result, _ = say_with_facts("It costs 75 dollars. The function of a library is reading.",
                               "What does it cost?", profile="fast")
    assert result.unfounded == "" and "75 dollars" in result.reply_text


def test_a_reply_that_opens_unsure_is_asked_again_with_the_facts_its_words_match():
    """"I don't know" to a question a fact answers in other words: asked once more.

    The matching facts go before the words, before anything was said; not where the caller
    named something no fact knows, and only once.
    """
    from agent.turn.knowledge import LOOK
    from agent.turn.runner import TurnRunner
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    class Unsure(FakeLLM):
        """Unsure of everything, until the facts are beside the words."""

        answer = "A replacement card costs 2 dollars."

        def _stream_impl(self, messages):
            beside = LOOK.split("\n")[0]
            self.reply = self.answer if beside in messages[-1].content else "I don't know."
            return super()._stream_impl(messages)

    profile = load_config(ROOT / "config.toml").profiles["default"]
    words = "I lost my card. What does a new one cost?"
    llm = Unsure()
    runner = TurnRunner(fake_stages(asr=FakeASR([words]), llm=llm, tts=FakeTTS()), profile)
    history: list = []
    result, _ = answer(runner, history)
    assert result.reply_text == Unsure.answer and len(llm.prompts) == 2
    assert "2 dollars" in llm.prompts[1][-1].content and "2 dollars" not in words
    assert result.unfounded.startswith("I don't know. (unsure: asked again with ")
    assert [m.content for m in history] == [words, Unsure.answer]  # the words as the cache has
    # A question about what no fact knows is not asked again: the profile's "don't know" is
    # its answer, which offers someone who does.
    runner.stages.asr = FakeASR(["Does the bookmobile stop on Oak Street?"])
    result, _ = answer(runner, [])
    assert result.reply_text == profile.dont_know and len(llm.prompts) == 3
    assert result.unfounded == "I don't know. (unsure: said dont_know)"
    # Only once: still unsure beside the facts, the caller hears that they do not know.
    Unsure.answer = "I don't know that either."
    runner.stages.asr = FakeASR([words])
    result, _ = answer(runner, [])
    assert result.reply_text == profile.dont_know and len(llm.prompts) == 5


def test_a_first_sentence_that_says_it_does_not_know_is_cut_where_it_says_so():
    """The rest of a refusal only repeats the caller's words, at a decode step a token.

    The stream ends at "know"; the caller hears the profile's ``dont_know`` at once. A first
    sentence already said, or whole and passed, is not cut: its "don't know" is the gate's.
    """
    from agent.turn.runner import TurnRunner
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    profile = load_config(ROOT / "config.toml").profiles["default"]
    refusal = "I don't know if you can book a lesson for Friday morning at the front desk."
    for pushes in (False, True):
        llm = FakeLLM(refusal, token_s=0.05, pushes=pushes)
        runner = TurnRunner(fake_stages(asr=FakeASR(["Can I book a lesson on Friday?"]), llm=llm,
                                        tts=FakeTTS()), profile)
        result, _ = answer(runner, [])
        assert result.reply_text == profile.dont_know
        assert result.unfounded == "I don't know (unsure: said dont_know)"
        # Cut four words in, not after fifteen: the reply's LLM time is the opening's.
        assert result.llm is not None and result.llm.tokens <= 6, result.llm
    # Advice that names the caller's doubt is no refusal: it goes through the gate whole.
    advice = "If you're not sure of your card number, the front desk can look it up for you."
    llm = FakeLLM(advice)
    runner = TurnRunner(fake_stages(asr=FakeASR(["I lost my card number."]), llm=llm,
                                    tts=FakeTTS()), profile)
    result, _ = answer(runner, [])
    assert result.reply_text != profile.dont_know and "(unsure: said" not in result.unfounded
    # A first sentence that answers goes on; a later one that does not know is its own.
    said = "We are open from 10 am. I don't know about the holidays."
    llm = FakeLLM(said)
    runner = TurnRunner(fake_stages(asr=FakeASR(["When do you open?"]), llm=llm,
                                    tts=FakeTTS()), profile)
    result, _ = answer(runner, [])
    assert result.reply_text.startswith("We are open from 10 am.")


def test_a_reply_that_opens_with_the_last_replys_words_is_asked_again():
    """A small model copies its previous answer to a new question: asked with the facts."""
    from agent.turn.knowledge import LOOK
    from agent.turn.runner import TurnRunner
    from models.llm.base import Message
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    last = "A library card is free for anyone who lives in the county."

    class Copies(FakeLLM):
        def _stream_impl(self, messages):
            looked = LOOK.split("\n")[0] in messages[-1].content
            self.reply = "A new library card, to replace a lost one, costs 2 dollars." if (
                looked) else last
            return super()._stream_impl(messages)

    profile = load_config(ROOT / "config.toml").profiles["default"]
    words = "And if I lose it, what does a new card cost?"
    llm = Copies()
    runner = TurnRunner(fake_stages(asr=FakeASR([words]), llm=llm, tts=FakeTTS()), profile)
    history = [Message("user", "Does a card cost anything?"), Message("assistant", last)]
    result, _ = answer(runner, history)
    assert result.reply_text.endswith("costs 2 dollars.") and len(llm.prompts) == 2


SHOP = (Fact("We rent city bikes for 25 dollars a day.", "Corner Cycles > Rentals"),
        Fact("A basic tune-up costs 65 dollars.", "Corner Cycles > Repairs"),
        Fact("An estimate is free.", "Corner Cycles > Repairs"),
        Fact("The shop's phone number is 555 0163.", "Corner Cycles > Phone"),
        Fact("We sell chains, tires and lights.", "Corner Cycles > Parts"))


def test_strictly_a_number_only_a_fact_about_something_else_holds_is_unfounded():
    k = Knowledge(SHOP, "You are the phone assistant of Corner Cycles.")
    # The rental's price said of a part no fact prices; the title every fact shares binds none.
    assert k.unfounded("A cycles chain costs 25 dollars.", "How much is a chain?",
                       strict=True) == {"25"}
    assert k.unfounded("A cycles chain costs 25 dollars.", "How much is a chain?") == set()
    # Bound by the caller's words, by the call's last turn (a follow-up), or by the sentence
    # restating its fact.
    assert k.unfounded("It is 25 dollars a day.", "How much to rent a city bike?",
                       strict=True) == set()
    assert k.unfounded("That is 25 dollars a day.", "How much is that?", strict=True,
                       before="I'd like to rent a bike. We rent city bikes.") == set()
    assert k.unfounded("That is 25 dollars a day.", "How much is that?", strict=True) == {"25"}
    assert k.unfounded("We rent city bikes for 25 dollars a day.", "What are your prices?",
                       strict=True) == set()
    # A phone number read digit by digit, of the business asked for.
    assert k.unfounded("It is five five five, zero one six three.", "What's your number?",
                       strict=True) == set()


def test_how_a_price_is_asked_is_no_unknown_subject():
    k = Knowledge(SHOP, "You are the phone assistant of Corner Cycles.")
    assert k.unknown_words("Do you charge for an estimate?") == set()
    assert k.unfounded("No, we don't charge for an estimate.", "Do you charge for an estimate?",
                       strict=True) == set()
    assert k.unfounded("No, we don't charge for delivery.", "Do you charge for delivery?",
                       strict=True) == {"delivery"}
    assert k.unknown_words("Is there a fee for storage?") == {"storage"}


def test_strictly_free_said_of_what_its_fact_prices_is_unfounded():
    k = Knowledge(SHOP + (Fact("A missed booking costs 30 dollars.", "Corner Cycles > Bookings"),),
                  "You are the phone assistant of Corner Cycles.")
    asked = "Is there a fee if I miss my booking?"
    assert k.unfounded("No, there is no fee if you miss it.", asked, strict=True) == {"free"}
    assert k.unfounded("No, there is no fee if you miss it.", asked) == set()
    # Where the fact it is about says free, or a tie of facts holds one that does, it may.
    assert k.unfounded("No, the estimate is free.", "Do you charge for an estimate?",
                       strict=True) == set()


def test_a_first_clause_leads_only_where_every_word_asked_is_a_facts_own():
    k = Knowledge(SHOP, "You are the phone assistant of Corner Cycles.")
    assert k.all_in_facts("How much to rent a city bike?")
    assert not k.all_in_facts("How much are your cycles?")  # only the name holds it
    assert not k.all_in_facts("Do you sell scooters?")


def test_an_answer_to_how_much_is_checked_whole_before_any_of_it_is_said():
    """No first clause goes early to a question of an amount: its number may be refused."""
    from agent.turn.wording import asks_amount

    assert asks_amount("What does it cost?") and asks_amount("Is there a fee if I miss it?")
    assert not asks_amount("Where is the library?")
    result, said = say_with_facts("The parking, for a whole day, costs 37 dollars.",
                                  "How much is the parking for a day?")
    dont_know = load_config(ROOT / "config.toml").profiles["default"].dont_know
    assert result.reply_text == dont_know == said[-1]  # not "The parking, Sorry, ..."
    assert result.unfounded.startswith("The parking, for a whole day, costs 37 dollars.")


def test_the_under_load_model_says_no_first_clause_before_its_sentence_passed():
    """Its refused first sentence gets the second pass, not a clause spliced with dont_know."""
    from agent.turn.runner import TurnRunner
    from dialplan.plan import under_load
    from tests.fakes import FakeASR, FakeLLM, FakeTTS, fake_stages
    from tests.replies import answer

    cfg = load_config(ROOT / "config.toml")
    main = cfg.profiles["default"]
    words = "What are your hours on Saturday?"  # every word a fact's own, no amount asked
    wrong = "We are open, on Saturday, from 10 am to 9 pm."  # the 9 no fact holds
    own = TurnRunner(fake_stages(asr=FakeASR([words]), llm=FakeLLM(reply=wrong), tts=FakeTTS()),
                     main)
    cheap_llm = FakeLLM(reply=wrong)
    cheap = TurnRunner(fake_stages(asr=FakeASR([words]), llm=cheap_llm, tts=FakeTTS()),
                       under_load(main, cfg.profiles["lite"]))
    result, _ = answer(cheap, [], escalate=own)
    assert result.unfounded.startswith(f"{wrong} (9")
    assert len(cheap_llm.prompts) == 2  # asked again, the facts before the words
    assert result.reply_text == main.dont_know  # not "We are open, Sorry, I don't know..."
    # The profile's own model's first clauses still go early (the caller's wait): here, with
    # the rest refused, what bench answers counts as spliced.
    result, _ = answer(own, [])
    assert result.reply_text == f"We are open, on Saturday, {main.dont_know}"


@pytest.mark.unit
def test_numbers_units_and_how_a_question_asks_are_no_subject_nor_an_unknown_thing():
    """One filter for what a text is about and for the caller's words no fact knows."""
    from agent.turn.terms import subject_words
    said = [w for w, _ in subject_words("Is room 12 free at nine on Mondays for six weeks?")]
    assert "room" in said and "mondays" in said
    assert not {"12", "nine", "six", "weeks", "is", "at"} & set(said)
    k = Knowledge((Fact("The study rooms are free on weekdays."),), "")
    assert k.unknown_words("Can I have room 12 for a chess club?") == {"chess", "club"}


def test_the_last_exchange_is_the_callers_words_and_the_reply_they_got():
    """What a follow-up is about: not a tool's answer, nor the notes a large file adds."""
    from agent.turn.runner import TurnRunner
    from agent.turn.tools import tool_response
    from models.llm.base import Message
    from tests.fakes import fake_stages

    runner = TurnRunner(fake_stages(), load_config(ROOT / "config.toml").profiles["default"])
    assert runner.last_exchange([]) == ("", "")
    history = [Message("user", "Is my book in?"), Message("assistant", '<tool_call>{}</tool_call>'),
               Message("user", tool_response('{"status": "on the shelf"}')),
               Message("assistant", "Yes, it is on the shelf.")]
    assert runner.last_exchange(history) == ("Is my book in?", "Yes, it is on the shelf.")
    assert runner.said_last(history) == "Is my book in?"
    assert runner.last_exchange(history[:1]) == ("Is my book in?", "")
