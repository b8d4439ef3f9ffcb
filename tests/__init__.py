"""Pariksha Studio tests (a package, so that `tests.support` is ours and not a site-packages `tests`)."""
