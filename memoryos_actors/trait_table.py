"""The 90 user-trait dimensions of MemoryOS's long-term persona memory, as pure data.

This module imports nothing of the package, so the records (which check trait names and
categories against it) and the tier cores can both use it without an import cycle.

The paper groups user traits into three categories: basic needs and personality,
AI-alignment dimensions (how the user wants an assistant to behave), and content-platform
interest tags. :data:`TRAITS` is the single table of all 90, 30 per category; every other
module takes names, categories and descriptions from here.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import NamedTuple

__all__ = ["TRAITS", "TRAITS_BY_NAME", "TRAIT_CATEGORIES", "TraitSpec", "category_of"]

TRAIT_CATEGORIES: tuple[str, ...] = (
    "basic_needs_personality",
    "ai_alignment",
    "content_interests",
)
"""The paper's three user-trait categories."""


class TraitSpec(NamedTuple):
    """One user-trait dimension: ``name`` (snake_case), ``category``, ``description``."""

    name: str
    category: str
    description: str


_P = "basic_needs_personality"
_A = "ai_alignment"
_C = "content_interests"

TRAITS: tuple[TraitSpec, ...] = (
    # --- basic needs & personality: motivation (Maslow, McClelland) and Big Five
    TraitSpec("physiological_needs", _P, "attention to sleep, food, rest and bodily comfort"),
    TraitSpec("safety_needs", _P, "concern for security, stability and predictability"),
    TraitSpec("belonging_needs", _P, "desire for friendship, family and community"),
    TraitSpec("esteem_needs", _P, "desire for recognition, status and self-respect"),
    TraitSpec("self_actualization", _P, "drive to grow and realise personal potential"),
    TraitSpec("cognitive_needs", _P, "desire to know, understand and explore ideas"),
    TraitSpec("aesthetic_needs", _P, "appreciation of beauty, order and form"),
    TraitSpec("autonomy", _P, "wish to decide and act independently"),
    TraitSpec("achievement_motivation", _P, "drive to master challenges and reach goals"),
    TraitSpec("power_motivation", _P, "wish to influence or lead others"),
    TraitSpec("affiliation_motivation", _P, "wish for warm, close relationships"),
    TraitSpec("need_for_order", _P, "preference for plans, routines and tidiness"),
    TraitSpec("openness", _P, "openness to new experiences, ideas and art"),
    TraitSpec("conscientiousness", _P, "carefulness, diligence and self-discipline"),
    TraitSpec("extraversion", _P, "energy drawn from social interaction"),
    TraitSpec("agreeableness", _P, "warmth, cooperation and trust in others"),
    TraitSpec("neuroticism", _P, "tendency to worry, stress or mood swings"),
    TraitSpec("curiosity", _P, "eagerness to ask questions and learn"),
    TraitSpec("risk_tolerance", _P, "comfort with uncertainty and bold choices"),
    TraitSpec("patience", _P, "calm tolerance of delay and difficulty"),
    TraitSpec("optimism", _P, "expectation that things will turn out well"),
    TraitSpec("empathy", _P, "sensitivity to other people's feelings"),
    TraitSpec("assertiveness", _P, "readiness to state needs and opinions directly"),
    TraitSpec("sense_of_humor", _P, "enjoyment of jokes, wit and play"),
    TraitSpec("resilience", _P, "ability to recover from setbacks"),
    TraitSpec("impulsivity", _P, "tendency to act quickly without planning"),
    TraitSpec("perfectionism", _P, "high standards and dislike of mistakes"),
    TraitSpec("introspection", _P, "habit of reflecting on own thoughts and feelings"),
    TraitSpec("social_confidence", _P, "ease in meeting and talking to strangers"),
    TraitSpec("competitiveness", _P, "desire to outperform others"),
    # --- AI-alignment dimensions: how the user wants the assistant to answer
    TraitSpec("helpfulness", _A, "values answers that solve the actual problem"),
    TraitSpec("honesty", _A, "values candour, even when the truth is unwelcome"),
    TraitSpec("harmlessness", _A, "sensitivity to unsafe or harmful content"),
    TraitSpec("instruction_following", _A, "expects instructions to be followed exactly"),
    TraitSpec("truthfulness", _A, "expects factual accuracy and no invention"),
    TraitSpec("coherence", _A, "values well-structured, logically connected answers"),
    TraitSpec("answer_complexity", _A, "preferred depth and sophistication of answers"),
    TraitSpec("conciseness", _A, "preference for short, to-the-point replies"),
    TraitSpec("precision", _A, "wants exact numbers, names and details"),
    TraitSpec("creativity", _A, "welcomes original, imaginative suggestions"),
    TraitSpec("formality", _A, "preferred formality of tone"),
    TraitSpec("politeness", _A, "expects courteous, respectful wording"),
    TraitSpec("emotional_support", _A, "wants empathy and encouragement in replies"),
    TraitSpec("playfulness", _A, "enjoys a light, humorous assistant"),
    TraitSpec("directness", _A, "prefers plain answers over hedging"),
    TraitSpec("explanation_depth", _A, "wants the reasoning behind answers explained"),
    TraitSpec("step_by_step", _A, "prefers procedures broken into numbered steps"),
    TraitSpec("examples", _A, "learns best from concrete examples"),
    TraitSpec("source_citation", _A, "wants sources and references given"),
    TraitSpec("uncertainty_disclosure", _A, "wants the assistant to say when it is unsure"),
    TraitSpec("proactivity", _A, "welcomes unasked-for suggestions and follow-ups"),
    TraitSpec("personalization", _A, "wants answers tailored to personal context"),
    TraitSpec("privacy_sensitivity", _A, "care about personal data being kept private"),
    TraitSpec("bias_sensitivity", _A, "attention to fairness and balanced viewpoints"),
    TraitSpec("ethical_sensitivity", _A, "attention to moral implications of advice"),
    TraitSpec("autonomy_respect", _A, "wants options laid out, not decisions made for them"),
    TraitSpec("critical_feedback", _A, "welcomes pushback and critique of their ideas"),
    TraitSpec("plain_language", _A, "prefers simple words over technical phrasing"),
    TraitSpec("jargon_tolerance", _A, "comfort with domain-specific terminology"),
    TraitSpec("response_speed", _A, "values a quick answer over a thorough one"),
    # --- content-platform interest tags
    TraitSpec("science", _C, "interest in the natural sciences"),
    TraitSpec("technology", _C, "interest in gadgets, software and the tech industry"),
    TraitSpec("programming", _C, "interest in writing code and software engineering"),
    TraitSpec("mathematics", _C, "interest in mathematics and puzzles"),
    TraitSpec("history", _C, "interest in historical events and periods"),
    TraitSpec("philosophy", _C, "interest in philosophical questions"),
    TraitSpec("psychology", _C, "interest in the mind and behaviour"),
    TraitSpec("education", _C, "interest in learning, courses and teaching"),
    TraitSpec("literature", _C, "interest in books, poetry and writing"),
    TraitSpec("film_and_tv", _C, "interest in movies, series and shows"),
    TraitSpec("music", _C, "interest in listening to or making music"),
    TraitSpec("visual_arts", _C, "interest in painting, photography and design"),
    TraitSpec("gaming", _C, "interest in video, board or tabletop games"),
    TraitSpec("sports", _C, "interest in playing or following sports"),
    TraitSpec("fitness", _C, "interest in exercise and training"),
    TraitSpec("health_and_medicine", _C, "interest in health, medicine and wellbeing"),
    TraitSpec("food_and_cooking", _C, "interest in cooking, recipes and dining"),
    TraitSpec("travel", _C, "interest in trips, places and cultures"),
    TraitSpec("fashion", _C, "interest in clothing and style"),
    TraitSpec("beauty_and_personal_care", _C, "interest in cosmetics and grooming"),
    TraitSpec("home_and_diy", _C, "interest in home improvement, crafts and gardening"),
    TraitSpec("parenting_and_family", _C, "interest in children, parenting and family life"),
    TraitSpec("pets_and_animals", _C, "interest in pets and wildlife"),
    TraitSpec("nature_and_environment", _C, "interest in nature, climate and sustainability"),
    TraitSpec("finance_and_investing", _C, "interest in money, saving and investing"),
    TraitSpec("career_and_business", _C, "interest in work, careers and entrepreneurship"),
    TraitSpec("politics_and_current_affairs", _C, "interest in news, politics and society"),
    TraitSpec("religion_and_spirituality", _C, "interest in faith and spiritual practice"),
    TraitSpec("cars_and_vehicles", _C, "interest in cars, motorbikes and transport"),
    TraitSpec("celebrities_and_social_media", _C, "interest in influencers and pop culture"),
)

TRAITS_BY_NAME: MappingProxyType[str, TraitSpec] = MappingProxyType({t.name: t for t in TRAITS})
"""Read-only ``name -> TraitSpec``."""

# The table is data that other modules rely on; a broken edit should fail at import.
if len(TRAITS) != 90 or len(TRAITS_BY_NAME) != 90:  # pragma: no cover
    raise RuntimeError("TRAITS must hold 90 distinct names")
if {t.category for t in TRAITS} != set(TRAIT_CATEGORIES):  # pragma: no cover
    raise RuntimeError("TRAITS must use exactly the categories of TRAIT_CATEGORIES")


def category_of(name: str) -> str | None:
    """The category of trait ``name``, or None if it is not one of the 90."""
    spec = TRAITS_BY_NAME.get(name)
    return spec.category if spec is not None else None
