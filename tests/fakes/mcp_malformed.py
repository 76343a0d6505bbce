"""A broken stdio MCP server, no SDK: it answers ``initialize`` and ``tools/list`` properly, then
answers every other request with a line that is not JSON."""

from __future__ import annotations

import json
import sys

_TOOLS = [{"name": "broken", "description": "Answers with garbage.", "inputSchema": {"type": "object"}},
          {"name": "odd_schema", "description": "Its schema is not a schema.", "inputSchema": {"type": "object", "properties": {"x": {"type": "nonsense"}}}}]


def _send(obj: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


def main() -> None:
    for line in sys.stdin:
        try:
            msg = json.loads(line)
        except ValueError:
            continue
        method, rid = msg.get("method"), msg.get("id")
        if rid is None:
            continue  # a notification
        if method == "initialize":
            version = msg.get("params", {}).get("protocolVersion", "2025-06-18")
            _send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": version, "capabilities": {"tools": {}},
                "serverInfo": {"name": "malformed", "version": "0"}}})
        elif method == "tools/list":
            _send({"jsonrpc": "2.0", "id": rid, "result": {"tools": _TOOLS}})
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": rid, "result": {}})
        else:
            sys.stdout.write("{this is not json\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
