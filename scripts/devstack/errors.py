class StackError(Exception):
    """A stack step failed; the message says what and how to fix it (printed as one line)."""
