"""The book's wing: what the course needs and an engineer using the library does not.

The physics library (``llm_roofline``) computes every number; this package turns numbers into
pages. It imports the library, and the library never imports it (``tests/test_layout.py``
walks every import to prove it).

- ``ch01`` ... ``ch09``: one module per chapter, holding that chapter's own figures and its
  answer checks, so a chapter's author finds everything of theirs in a notebook and a module;
- ``plots``: the figures and Matplotlib settings that several chapters share;
- ``widgets``: the live ipywidgets bindings and their kernel-free twins (scrubbers, tables);
- ``prose``: ``states``, which asserts a number the prose prints;
- ``registry``: the answer-check registry the chapter modules register with;
- ``exercises``: ``check`` and ``list_exercises`` over every chapter's exercises;
- ``student``: the student edition (solutions removed, outputs cleared);
- ``webcalc``: the live calculator's build-time export to JavaScript (a Sphinx extension).
"""
