"""Errors that reach the user as one line and a non-zero exit code."""


class UserError(Exception):
    """Bad input or setup the user can fix; the CLI prints it as one line and exits 1.

    The message should name the file, line and field where that applies, and what to do.
    """
