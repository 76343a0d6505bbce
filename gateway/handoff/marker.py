"""What starts the source chat's reply once a handoff is done: the terminal chat ends on it."""

HANDOFF_DONE_PREFIX = "Handoff complete"
