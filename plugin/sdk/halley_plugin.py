"""Halley plugin SDK: the few helpers a plugin needs, standard library only.

Halley writes this file into the working directory of every Python plugin run and puts that directory on
PYTHONPATH, so a plugin uploaded on its own can simply::

    import halley_plugin as hp

    inp = hp.read_input()
    size = inp["context"].get("size_gb")
    if not size:
        hp.fail("size_gb is required")
    hp.write_output(context={"checked": True})

To try a plugin on your machine, put this file next to it (or set PYTHONPATH to its folder) and pipe an input
into it: ``echo '{"run_id":"r1","context":{}}' | python3 my_plugin.py``.

The protocol (docs/plugins.md): Halley writes ONE JSON object to stdin and reads ONE JSON object from stdout.
Print nothing else to stdout; use log() (stderr) for diagnostics.
"""

import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

__all__ = ["read_input", "write_output", "fail", "log", "post_result", "PluginError"]

_DECISIONS = (None, "", "approve", "reject")


class PluginError(Exception):
    """Raised by post_result when Halley answers with an error."""

    def __init__(self, status, body):
        super().__init__("halley answered %s: %s" % (status, body))
        self.status = status
        self.body = body


def read_input(stream=None):
    """Read the run's input from stdin and return it as a dict.

    Keys: run_id, instance_id, node_id, phase ("pre", "after" or "auto"), context (the instance context),
    node (the node's definition) and callback_url. A missing context or node is returned as {}.
    """
    stream = stream if stream is not None else sys.stdin
    raw = stream.read()
    try:
        data = json.loads(raw) if raw.strip() else {}
    except ValueError as exc:
        fail("halley_plugin: stdin is not JSON: %s" % exc)
    if not isinstance(data, dict):
        fail("halley_plugin: stdin is not a JSON object")
    data.setdefault("context", {})
    data.setdefault("node", {})
    if data["context"] is None:
        data["context"] = {}
    if data["node"] is None:
        data["node"] = {}
    return data


def write_output(context=None, decision=None, async_=False, stream=None):
    """Write the run's result to stdout: call it exactly once, as the last thing the plugin prints there.

    context  -- a dict merged into the instance context.
    decision -- "approve" or "reject" (auto nodes: reject kills the node's outgoing edges); None for no decision.
    async_   -- True when the work goes on elsewhere and someone will call POST /api/v1/plugin-runs/{id}/result.
    """
    if decision not in _DECISIONS:
        fail("halley_plugin: decision must be 'approve' or 'reject', not %r" % (decision,))
    if context is not None and not isinstance(context, dict):
        fail("halley_plugin: context must be a dict, not %s" % type(context).__name__)
    out = {"context": context or {}}
    if decision:
        out["decision"] = decision
    if async_:
        out["async"] = True
    stream = stream if stream is not None else sys.stdout
    stream.write(json.dumps(out, ensure_ascii=False, default=str))
    stream.write("\n")
    stream.flush()


def log(*args):
    """Print a diagnostic line to stderr (kept in the run's log; stdout is reserved for the result)."""
    print(*args, file=sys.stderr, flush=True)


def fail(message, code=1):
    """Write message to stderr and exit with code (not 0): the node's error_handler decides what happens next."""
    if code == 0:
        code = 1
    sys.stderr.write(str(message).rstrip("\n") + "\n")
    sys.stderr.flush()
    sys.exit(code)


def post_result(run_id, status, data=None, base_url=None, token=None, timeout=10.0):
    """Finish an asynchronous run: POST {base_url}/api/v1/plugin-runs/{run_id}/result.

    status   -- "succeeded" or "failed".
    data     -- a dict; on success it is merged into the instance context like a synchronous plugin's context.
    base_url -- Halley's address, e.g. "https://halley.example.com". Defaults to the scheme and host of the
                HALLEY_CALLBACK_URL environment variable, when the plugin itself calls back.
    token    -- an admin bearer token. Not needed when HALLEY_CALLBACK_URL is this run's signed result URL (the
                default for plugins outside callback nodes): that URL is used as it is.

    Returns the decoded answer. Raises PluginError when Halley answers with an error (409: already finished).
    """
    if status not in ("succeeded", "failed"):
        raise ValueError("status must be 'succeeded' or 'failed', not %r" % (status,))
    cb = os.environ.get("HALLEY_CALLBACK_URL", "")
    path = "/api/v1/plugin-runs/%s/result" % urllib.parse.quote(str(run_id), safe="")
    if not base_url and not token and urllib.parse.urlsplit(cb).path == path:
        url = cb  # the signed result URL of this very run: its token authenticates the call
    else:
        if not base_url:
            parts = urllib.parse.urlsplit(cb)
            if not parts.scheme or not parts.netloc:
                raise ValueError("base_url is required (no HALLEY_CALLBACK_URL to take it from)")
            base_url = "%s://%s" % (parts.scheme, parts.netloc)
        url = base_url.rstrip("/") + path
    body = json.dumps({"status": status, "data": data or {}}).encode("utf-8")
    headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if token:
        headers["Authorization"] = "Bearer " + token
    req = urllib.request.Request(url, data=body, headers=headers, method="POST")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            raw = resp.read()
    except urllib.error.HTTPError as exc:
        raise PluginError(exc.code, exc.read().decode("utf-8", "replace")) from None
    return json.loads(raw) if raw.strip() else {}
