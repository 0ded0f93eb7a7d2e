"""A recommendation question finds what the user said about their own things, through the
public API (LongMemEval's single-session-preference questions, issue #45)."""

from __future__ import annotations

USER = "ana"

# What the user said once about their kitchen, long before the question.
STATED = (
    "I'm organizing my kitchen utensils; I just bought a bamboo utensil holder to keep "
    "the countertops clear.",
    "A bamboo holder with three sections works well; sort the utensils by how often you use them.",
)

# Many later turns that share the request's words (tips, mess, clean, keeping) about
# other rooms: more than the context holds (top_k_pages plus STM).
ROOMS = ("closet", "garage", "attic", "desk", "car", "basement", "balcony", "shed")


def _distractors() -> list[tuple[str, str]]:
    turns = []
    for i in range(32):
        room = ROOMS[i % len(ROOMS)]
        turns.append(
            (
                f"Any tips for keeping my {room} clean? It turns into a mess again every week "
                f"(note {i}).",
                f"Keeping a {room} clean: a weekly five-minute reset stops the mess; tips: "
                "one shelf at a time.",
            )
        )
    return turns


def test_a_recommendation_question_with_a_possessive_finds_the_users_own_statement(
    open_mem,
) -> None:
    mem = open_mem()
    first = mem.add_turn(USER, *STATED)
    for query, response in _distractors():
        mem.add_turn(USER, query, response)
    mem.flush()
    # "kitchen's": the possessive names the same kitchen the user talked about.
    ctx = mem.retrieve(
        USER, "My kitchen's becoming a bit of a mess again. Any tips for keeping it clean?"
    )
    assert first in ctx.page_ids()
