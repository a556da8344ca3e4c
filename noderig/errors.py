"""The one exception type the CLI turns into a user-facing sentence instead of a traceback."""


class NoderigError(Exception):
    """A failure with a message meant for the user: what failed, where, and what to do."""
