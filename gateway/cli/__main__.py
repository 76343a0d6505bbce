"""``python -m gateway.cli``: the same command line as the ``hermes-gateway`` script."""

from gateway.cli.app import main

main()
