"""The answer-check registry: ``register`` an exercise, ``check`` an answer against it.

Each exercise has an id (``<topic>-<n>``, the topic naming its notebook: ``roofline-1`` is in
``notebooks/03_roofline``), an expected value computed from the library when first checked (so
the book and its answers cannot drift apart), a unit, a relative tolerance and a hint. A check
says whether the answer is right, and if not, the direction and a coarse band of how far off it
is (within 10 %, 10 to 50 %, a factor of about 2, 3 to 10, an order of magnitude or more) and a
hint: never the expected value, nor a figure precise enough to compute it from. An exercise can
name typical mistakes, each with the answer it leads to (computed, like the expected value,
from the library); an answer that matches one gets the explanation of that mistake instead of
the general hint.

The chapter modules (``course.ch01`` ... ``course.ch09``) import this module and register their
exercises; this module imports none of them. ``course.exercises`` imports them all, so that a
notebook's ``from llm_roofline.course.exercises import check`` knows every exercise.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .. import validate
from ..validate import shorten

__all__ = ["Exercise", "Hint", "Verdict", "check", "hint", "list_exercises", "register",
           "register_hint", "smallest"]

#: answers are compared on a log scale; sizes outside this range are refused as typos
_SMALLEST, _LARGEST = 1e-100, 1e100


@dataclass(frozen=True)
class Exercise:
    """One numeric exercise; ``expected()`` computes the answer from the library."""

    id: str
    expected: Callable[[], float]
    unit: str
    rtol: float
    hint: str
    mistakes: tuple[tuple[Callable[[], float], str], ...] = ()


@dataclass(frozen=True)
class Verdict:
    """The result of a check: truthy when correct; displays as its message."""

    correct: bool
    message: str

    def __bool__(self) -> bool:
        return self.correct

    def __str__(self) -> str:
        return self.message

    __repr__ = __str__


_REGISTRY: dict[str, Exercise] = {}

_HINTS: dict[str, str] = {}  # hints of the exercises with no numeric answer to check


@dataclass(frozen=True)
class Hint:
    """An exercise's hint, shown collapsed: a ``<details>`` element on the website and in
    JupyterLab (the reader opens it), plain text elsewhere (the PDF, a terminal)."""

    id: str
    text: str

    def _repr_html_(self) -> str:
        from html import escape

        return (f'<details class="exercise-hint"><summary>Hint</summary>'
                f"<p>{escape(self.text)}</p></details>")

    def _repr_latex_(self) -> str:
        from .widgets import PRINT_MARK, latex_text

        return PRINT_MARK + r"\textit{Hint:} " + latex_text(self.text)

    def __str__(self) -> str:
        return f"Hint: {self.text}"

    __repr__ = __str__


def register(id: str, expected: Callable[[], float], *, unit: str, hint: str,
             rtol: float = 0.01,
             mistakes: Sequence[tuple[Callable[[], float], str]] = ()) -> Exercise:
    """Add an exercise; ``expected`` is a function of no arguments (called at check time).

    ``mistakes`` pairs a function giving the answer a typical mistake leads to with what
    went wrong (``(lambda: tpot / batch, "you divided the step time by the batch")``).
    """
    id = validate.text("exercise id", id, limit=100)
    if id in _REGISTRY:
        raise ValueError(f"exercise id {id!r} is already registered")
    if not callable(expected):
        raise ValueError(f"expected must be a function of no arguments, got {shorten(expected)}")
    unit = validate.text("unit", unit, limit=100)
    hint = validate.text("hint", hint, limit=2000)
    rtol = validate.real("rtol", rtol, minimum=0, maximum=1, open_max=True)
    if isinstance(mistakes, str | bytes) or not isinstance(mistakes, Sequence):
        raise ValueError(f"mistakes must be a list of (function, explanation), got "
                         f"{shorten(mistakes)}")
    for mistake in mistakes:
        if not (isinstance(mistake, tuple) and len(mistake) == 2 and callable(mistake[0])
                and isinstance(mistake[1], str)):
            raise ValueError(f"each mistake must be (function, explanation), got {shorten(mistake)}")
    _REGISTRY[id] = Exercise(id, expected, unit, rtol, hint, tuple(mistakes))
    return _REGISTRY[id]


def register_hint(id: str, text: str) -> None:
    """The hint of an exercise with no numeric answer (a design problem, a why-question)."""
    id = validate.text("exercise id", id, limit=100)
    if id in _REGISTRY or id in _HINTS:
        raise ValueError(f"exercise id {id!r} is already registered")
    _HINTS[id] = validate.text("hint", text, limit=2000)


def hint(id: str) -> Hint:
    """The hint of exercise ``id``: the one ``check`` gives, or the one ``register_hint`` set.

    A chapter shows it collapsed just before the exercise's solution, so that a reader of the
    website gets the same hint a reader running the notebook gets from ``check``.
    """
    id = validate.text("exercise id", id, limit=100)
    if id in _REGISTRY:
        return Hint(id, _REGISTRY[id].hint)
    if id in _HINTS:
        return Hint(id, _HINTS[id])
    known = ", ".join(sorted([*_REGISTRY, *_HINTS])[:12])
    raise ValueError(f"unknown exercise id {shorten(id)}; known: {known}, ...")


def list_exercises() -> list[str]:
    """All registered exercise ids."""
    return list(_REGISTRY)


def check(id: str, answer: float) -> Verdict:
    """Compare ``answer`` (in the exercise's unit) with the expected value.

    Correct means within the exercise's relative tolerance. Otherwise the verdict says
    whether the answer is too high or too low, in which coarse band (see the module
    docstring), and gives the hint.
    """
    if not isinstance(id, str):
        raise ValueError(f"exercise id must be a name such as 'roofline-1', got {shorten(id)}")
    if id not in _REGISTRY:
        raise validate.unknown("exercise", id, _REGISTRY)
    exercise = _REGISTRY[id]
    if not validate.is_number(answer):
        # a string such as "5" is not graded: the notebook computes the answer as a number
        raise ValueError(f"answer must be a number in {exercise.unit}, got {shorten(answer)}")
    value = validate.as_float(answer)  # a Decimal or a Fraction is read like a float
    if not math.isfinite(value):
        raise ValueError(f"answer must be a finite number in {exercise.unit}, got {shorten(answer)}")
    if value != 0 and not _SMALLEST <= abs(value) <= _LARGEST:
        raise ValueError(
            f"answer must be a number in {exercise.unit} of size {_SMALLEST:g} to {_LARGEST:g} "
            f"(or 0), got {shorten(answer)}: check its unit and exponent"
        )
    expected = float(exercise.expected())
    tolerance = _tolerance(exercise.rtol)
    if math.isclose(value, expected, rel_tol=exercise.rtol, abs_tol=0.0):
        return Verdict(True, f"{id}: correct ({value:g} {exercise.unit}, tolerance {tolerance}).")
    if value <= 0 < expected:
        off = "not positive"
    else:
        off = _how_far_off(math.log10(value) - math.log10(expected))
    hint = exercise.hint
    for wrong, explanation in exercise.mistakes:
        if math.isclose(value, float(wrong()), rel_tol=max(exercise.rtol, 1e-9), abs_tol=0.0):
            hint = explanation
            break
    return Verdict(
        False,
        f"{id}: not yet: {value:g} {exercise.unit} is {off} (tolerance {tolerance}). Hint: {hint}",
    )


def _tolerance(rtol: float) -> str:
    """A relative tolerance in words: ``"1 %"``, ``"0.5 %"``; below 0.01 % it is exact."""
    if 100 * rtol < 0.01:
        return "exact, up to rounding" if rtol else "exact"
    return f"{100 * rtol:.2g} %"


def smallest(predicate, low: int, high: int) -> int:
    """The smallest integer in ``[low, high]`` where a monotone ``predicate`` holds.

    For expected values found by search ("the shortest prompt whose prefill takes ..."); raises
    ``ValueError`` when even ``high`` does not satisfy it.
    """
    if not predicate(high):
        raise ValueError(f"no value up to {high} satisfies the condition")
    while low < high:
        mid = (low + high) // 2
        if predicate(mid):
            high = mid
        else:
            low = mid + 1
    return low


def _how_far_off(decades: float) -> str:
    """A coarse band for ``log10(answer / expected)`` (answer positive, not within tolerance)."""
    direction = "high" if decades > 0 else "low"
    factor = 10 ** min(abs(decades), 300.0)
    if factor < 1.1:
        return f"a little too {direction} (within 10 %)"
    if factor < 1.5:
        return f"too {direction} by 10 to 50 %"
    if factor < 3:
        return f"too {direction} by a factor of about 2"
    if factor < 10:
        return f"too {direction} by a factor of 3 to 10"
    rounded = round(abs(decades))
    if rounded == 1:
        return f"an order of magnitude too {direction}"
    return f"too {direction} by a factor of about {10**rounded:,}"
