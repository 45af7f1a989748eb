"""Every chapter's answer checks in one place: ``check("roofline-1", 590)``.

Importing this module imports each chapter module, and each registers its exercises with
:mod:`llm_roofline.course.registry`; the registry itself imports no chapter, so no import
goes in a circle. A notebook writes ``from llm_roofline.course.exercises import check, hint``.
"""

from __future__ import annotations

from . import ch01, ch02, ch03, ch04, ch05, ch06, ch07, ch08, ch09  # noqa: F401  (each registers its checks)
from .registry import Hint, Verdict, check, hint, list_exercises

__all__ = ["Hint", "Verdict", "check", "hint", "list_exercises"]
