"""The command line: one typer sub-app per command group (``run``, ``chat``, ``sessions``, ``service``, ``doctor``, ``status``)."""

from gateway.cli.app import app, main

__all__ = ["app", "main"]
